"""Flink serializer snapshots, and decoders for the values of Flink's built-in serializers.

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

From the parsed tree, :func:`codec_for` builds a :class:`Codec`: a reader of one value in
Flink's byte layout (reference §6.4), the statectl type spec it maps to, and Flink's
``getLength()`` (which decides the canonical savepoint key layout, §6.3). A serializer we do
not know gets no codec: its values stay raw bytes where their length is known (canonical
savepoints, length-prefixed values) and the state cannot be decoded otherwise — never a crash.

The codecs of Flink's richer types are in modules of their own: ``BinaryRowData`` (Flink SQL's
``RowDataSerializer``) in :mod:`formats.flink.row_data`; POJOs, enums, ``java.time``, Kryo and
generic arrays in :mod:`formats.flink.typecodecs`.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from formats.flink.codec import Codec
from formats.flink.javaio import DataReader
from formats.flink.javaser import read_java_object
from formats.flink.row_data import row_data_codec
from formats.flink.typecodecs import (
    TEMPORAL,
    enum_codec,
    generic_array_codec,
    kryo_codec,
    pojo_codec,
)
from statecore.errors import StatectlError, UnsupportedFormatError
from statecore.hashing import (
    java_bool_hash,
    java_char_hash,
    java_double_hash,
    java_float_hash,
    java_int_hash,
    java_list_hash,
    java_long_hash,
    java_string_hash,
    java_tuple_hash,
    to_int32,
)
from statecore.serializers import VOID_NAMESPACE, parse_type
from statecore.ttl import TtlValue

__all__ = ["PRIMITIVE_ARRAYS", "ROW_KINDS", "Codec", "RowWithKind",
           "SerializerSnapshot", "codec_for", "opaque_spec", "read_snapshot",
           "read_versioned_snapshot", "row_legacy_mode", "why_undecodable"]

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
_NAME = re.compile(r"[^\s<>,:]+")


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


# -- codecs ---------------------------------------------------------------------------------


def _void(r: DataReader) -> Any:
    if r.u8():
        raise r.fail("bad void namespace byte")
    return VOID_NAMESPACE


VOID_READ = _void


def _char(r: DataReader) -> str:
    return chr(r.u16())


_string = DataReader.string_value
STRING_READ = _string


def _time_window(r: DataReader) -> tuple[int, int]:
    return (r.i64(), r.i64())


def _string_data(r: DataReader) -> str:
    raw = r.sized_bytes()
    return raw.decode("utf-8", "replace")


_BASIC: dict[str, Codec] = {
    "StringSerializer": Codec(_string, "string", -1, "String", java_string_hash),
    "IntSerializer": Codec(DataReader.i32, "int32", 4, "Integer", java_int_hash,
                            struct_code="i"),
    "LongSerializer": Codec(DataReader.i64, "int64", 8, "Long", java_long_hash,
                             struct_code="q"),
    "ShortSerializer": Codec(DataReader.i16, "int16", 2, "Short", java_int_hash,
                              struct_code="h"),
    "ByteSerializer": Codec(DataReader.i8, "int8", 1, "Byte", java_int_hash,
                             struct_code="b"),
    "BooleanSerializer": Codec(DataReader.boolean, "bool", 1, "Boolean", java_bool_hash,
                                struct_code="?"),
    "FloatSerializer": Codec(DataReader.f32, "float32", 4, "Float", java_float_hash,
                              struct_code="f"),
    "DoubleSerializer": Codec(DataReader.f64, "float64", 8, "Double", java_double_hash,
                               struct_code="d"),
    "CharSerializer": Codec(_char, "char", 2, "Character", java_char_hash),
    "BytePrimitiveArraySerializer": Codec(DataReader.sized_bytes, "bytes", -1, "byte[]"),
    "ByteArrayWrapperSerializer": Codec(DataReader.sized_bytes, "bytes", -1,
                                        "ByteArrayWrapper"),
    "VoidNamespaceSerializer": Codec(_void, "void", 0, "VoidNamespace"),
    "TimeWindow": Codec(_time_window, "tuple<int64,int64>", 16, "TimeWindow"),
    "StringDataSerializer": Codec(_string_data, "string", -1, "StringData"),
}


def codec_for(snapshot: SerializerSnapshot) -> Codec | None:
    """The codec of a serializer snapshot, or ``None`` when statectl cannot decode it."""
    if snapshot.outer.get("unparsed"):  # a framed snapshot statectl could not read
        return None
    short = snapshot.short_name
    outer = short.split("$")[0]
    if outer in _BASIC:
        return _BASIC[outer]
    if outer in TEMPORAL:  # java.time, java.sql, java.util.Date, big numbers, GlobalWindow
        return TEMPORAL[outer]
    if outer in PRIMITIVE_ARRAYS:  # an int32 length, then the elements
        element = _BASIC[PRIMITIVE_ARRAYS[outer]]
        return _list_codec(element, f"{element.name}[]")
    if short.startswith("RowDataSerializer$"):  # fields read from the binary row's layout
        return row_data_codec(snapshot.java_objects)
    if short == "EnumSerializer$EnumSerializerSnapshot":
        return enum_codec(snapshot.outer["class"], snapshot.outer["constants"])
    if short == "KryoSerializerSnapshot":
        return kryo_codec(snapshot.outer["class"])
    nested = [codec_for(n) for n in snapshot.nested]
    if any(c is None for c in nested):
        return None
    parts: list[Codec] = [c for c in nested if c is not None]
    if short == "PojoSerializerSnapshot" and parts:
        return _spec_checked(pojo_codec(
            snapshot.outer["class"], list(zip(snapshot.outer["fields"], parts, strict=True)),
            snapshot.outer["registered_subclasses"]))
    if short.startswith("GenericArraySerializerSnapshot") and len(parts) == 1:
        return generic_array_codec(snapshot.outer.get("class", "Object"), parts[0])
    if short == "ListSerializerSnapshot" and len(parts) == 1:
        return _list_codec(parts[0])
    if short == "MapSerializerSnapshot" and len(parts) == 2:
        return _map_codec(parts[0], parts[1])
    if short.startswith("TtlStateFactory$TtlSerializerSnapshot") and len(parts) == 2:
        return _ttl_codec(parts[0], parts[1])
    if short.startswith("TupleSerializerSnapshot") and parts:
        return _tuple_codec(parts, "Tuple")
    if short == "TimerSerializerSnapshot" and len(parts) == 2:
        return _timer_codec(parts[0], parts[1])
    if short.startswith("RowSerializer$") and parts:
        return _row_codec(parts, row_legacy_mode(snapshot))
    if short.startswith("ExternalSerializer$") and len(parts) == 1:
        return parts[0]  # converts to the internal type, serialized by the nested serializer
    return None


def why_undecodable(snapshot: SerializerSnapshot, where: str = "") -> str:
    """Which serializer in ``snapshot``'s tree statectl cannot decode, for messages."""
    if codec_for(snapshot) is not None:
        return ""
    fields = snapshot.outer.get("fields")
    for i, nested in enumerate(snapshot.nested):
        if codec_for(nested) is None:
            part = (f"field {fields[i]!r} of POJO {snapshot.outer.get('class')}"
                    if fields is not None and i < len(fields) else nested.describe())
            return why_undecodable(nested, f"{where}{part}: ")
    if snapshot.outer.get("unparsed"):
        return f"{where}serializer snapshot {snapshot.class_name} (not readable)"
    return f"{where}serializer {snapshot.class_name}"


def opaque_spec(snapshot: SerializerSnapshot | None) -> str:
    """The spec of a value statectl cannot decode: ``opaque<class>``, else ``bytes``.

    The class of the values where the snapshot names it (a POJO's), else the snapshot's class.
    """
    if snapshot is None:
        return "bytes"
    name = snapshot.outer.get("class") or snapshot.class_name
    if not isinstance(name, str) or len(name) > MAX_NAME or not _NAME.fullmatch(name):
        return "bytes"
    return f"opaque<{name}>"


def _spec_checked(codec: Codec) -> Codec | None:
    """A codec whose type spec statectl can hold (a bounded spec), else none."""
    try:
        parse_type(codec.spec)
    except StatectlError:
        return None
    return codec


#: Flink's primitive-array serializers (and ``String[]``) -> the element's serializer; each
#: writes ``int length`` then the elements with the element type's write (read here, written
#: by :mod:`formats.flink.encoders`).
PRIMITIVE_ARRAYS = {
    "BooleanPrimitiveArraySerializer": "BooleanSerializer",
    "CharPrimitiveArraySerializer": "CharSerializer",
    "ShortPrimitiveArraySerializer": "ShortSerializer",
    "IntPrimitiveArraySerializer": "IntSerializer",
    "LongPrimitiveArraySerializer": "LongSerializer",
    "FloatPrimitiveArraySerializer": "FloatSerializer",
    "DoublePrimitiveArraySerializer": "DoubleSerializer",
    "StringArraySerializer": "StringSerializer",
}


def _ttl_codec(timestamp: Codec, value: Codec) -> Codec | None:
    """``TtlSerializer``: the int64 last-access timestamp, then the value (reference §9.2).

    Values are ``TtlValue(value, timestamp)`` of the value's type.
    """
    if timestamp.spec != "int64":
        return None
    read_value = value.read
    read_all = value.read_all

    def read(r: DataReader) -> TtlValue[Any]:
        timestamp = r.i64()
        return TtlValue(read_value(r), timestamp)

    def read_rest(r: DataReader) -> TtlValue[Any]:
        timestamp = r.i64()
        assert read_all is not None
        return TtlValue(read_all(r), timestamp)

    return Codec(read, value.spec, -1 if value.length < 0 else 8 + value.length,
                 f"TtlValue<{value.name}>", read_all=read_rest if read_all else None, ttl=True)


_COUNT = struct.Struct(">i")
_ARRAYS: dict[tuple[str, int], struct.Struct] = {}


def _list_codec(element: Codec, name: str = "") -> Codec:
    """``ListSerializer``: an int count, then the elements.

    Fixed-size primitive elements are read with one ``struct`` call for all.
    """
    read_element = element.read
    code, size = element.struct_code, element.length
    least = max(size, 1)  # every element takes a byte at least

    def read(r: DataReader) -> list[Any]:
        pos, end = r.pos, r.end
        if pos + 4 > end:
            raise r.fail(f"truncated: 4 more bytes expected, {end - pos} left")
        n = _COUNT.unpack_from(r.data, pos)[0]
        r.pos = pos = pos + 4
        if n < 0 or n * least > end - pos:
            raise r.fail(f"impossible list elements {n} ({end - pos} bytes left)")
        if code is None:
            if read_element is not DataReader.sized_bytes:
                return [read_element(r) for _ in range(n)]
            return r.byte_arrays(n)  # byte arrays (PyFlink's Python state): in one loop
        parser = _ARRAYS.get((code, n))
        if parser is None:
            parser = struct.Struct(f">{n}{code}")
            if len(_ARRAYS) < 4096:
                _ARRAYS[(code, n)] = parser
        r.pos = pos + n * size
        return list(parser.unpack_from(r.data, pos))

    return Codec(read, f"list<{element.spec}>", -1, name or f"List<{element.name}>")


def _map_codec(key: Codec, value: Codec) -> Codec:
    """``MapSerializer``: an int count, then per entry the key, a null flag, the value."""
    read_key, read_value = key.read, value.read
    # a fixed-size primitive value is unpacked in place
    fixed = struct.Struct(">" + value.struct_code) if value.struct_code else None
    size = value.length

    def read(r: DataReader) -> dict[Any, Any]:
        pos, end = r.pos, r.end
        if pos + 4 > end:
            raise r.fail(f"truncated: 4 more bytes expected, {end - pos} left")
        n = _COUNT.unpack_from(r.data, pos)[0]
        r.pos = pos = pos + 4
        if n < 0 or n > end - pos:  # every entry takes a byte at least
            raise r.fail(f"impossible map entries {n} ({end - pos} bytes left)")
        out: dict[Any, Any] = {}
        data = r.data
        for _ in range(n):
            k = read_key(r)
            pos = r.pos  # a null flag, then the value unless null
            if pos >= end:
                raise r.fail("truncated: 1 more bytes expected, 0 left")
            r.pos = pos = pos + 1
            if data[pos - 1]:
                out[k] = None
            elif fixed is not None:
                if pos + size > end:
                    raise r.fail(f"truncated: {size} more bytes expected, {end - pos} left")
                out[k] = fixed.unpack_from(data, pos)[0]
                r.pos = pos + size
            else:
                out[k] = read_value(r)
        return out

    return Codec(read, f"map<{key.spec},{value.spec}>", -1, f"Map<{key.name},{value.name}>")


def _tuple_codec(parts: list[Codec], name: str) -> Codec:
    readers = [p.read for p in parts]

    def read(r: DataReader) -> tuple[Any, ...]:
        return tuple([f(r) for f in readers])

    length = -1 if any(p.length < 0 for p in parts) else sum(p.length for p in parts)
    hashes = [p.java_hash for p in parts]
    java_hash = None
    if name == "Tuple" and all(h is not None for h in hashes):
        def java_hash(value: tuple[Any, ...]) -> int:  # Flink TupleN.hashCode (reference §2)
            return java_tuple_hash(None if v is None else h(v)  # type: ignore[misc]
                                   for h, v in zip(hashes, value, strict=True))
    return Codec(read, "tuple<" + ",".join(p.spec for p in parts) + ">", length,
                 f"{name}<{','.join(p.name for p in parts)}>", java_hash)


def _timer_codec(key: Codec, namespace: Codec) -> Codec:
    read_key, read_ns = key.read, namespace.read

    def read(r: DataReader) -> tuple[int, Any, Any]:
        timestamp = r.i64() ^ (-1 << 63)  # MathUtils.flipSignBit
        return timestamp, read_key(r), read_ns(r)

    # a timer's value is its int64 timestamp; ``spec`` names its namespace's type
    return Codec(read, namespace.spec, -1, f"Timer<{key.name},{namespace.name}>")


def row_legacy_mode(snapshot: SerializerSnapshot) -> bool:
    """Whether a ``RowSerializer``'s rows carry no ``RowKind``.

    ``RowSerializerSnapshot.readOuterSnapshot``: outer versions below 3 do not, version 3
    does, later ones say so in a boolean (read as ``legacy_mode``).
    """
    legacy = snapshot.outer.get("legacy_mode")
    if legacy is None:
        return bool(snapshot.outer.get("version", 3) < 3)
    return bool(legacy)


#: ``RowKind.toByteValue()``: INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE.
ROW_KINDS = (0, 1, 2, 3)


class RowWithKind(tuple):  # type: ignore[type-arg]
    """A decoded ``Row`` whose ``RowKind`` is not ``INSERT``: its fields, and the kind.

    ``kind`` is the kind's byte value (:data:`ROW_KINDS`), which the writer writes back. An
    ``INSERT`` row is a plain tuple.
    """

    kind: int

    def __new__(cls, values: list[Any], kind: int) -> RowWithKind:
        obj = super().__new__(cls, values)
        obj.kind = kind
        return obj


def _row_codec(parts: list[Codec], legacy: bool) -> Codec:
    """``RowSerializer``: a bit mask, then the non-null fields.

    The mask has two RowKind bits unless legacy, then one null bit per field, most
    significant bit first. A row of another kind than ``INSERT`` is a :class:`RowWithKind`.
    """
    readers = [p.read for p in parts]
    offset = 0 if legacy else 2
    mask_bytes = (len(parts) + offset + 7) // 8

    total = mask_bytes * 8
    # per field: its null bit's shift in the mask, its reader
    layout = [(total - 1 - offset - i, f) for i, f in enumerate(readers)]

    def read(r: DataReader) -> tuple[Any, ...]:
        pos = r.pos
        if pos + mask_bytes > r.end:
            raise r.fail(f"truncated: {mask_bytes} more bytes expected, {r.end - pos} left")
        r.pos = pos + mask_bytes
        mask = int.from_bytes(r.data[pos:pos + mask_bytes], "big")
        values = [None if mask >> shift & 1 else f(r) for shift, f in layout]
        # readKindFromMask: mask[0] is 1, mask[1] is 2 (both 0: INSERT)
        kind = (mask >> (total - 1) & 1 | (mask >> (total - 2) & 1) << 1) if offset else 0
        return RowWithKind(values, kind) if kind else tuple(values)

    hashes = [p.java_hash for p in parts]

    def java_hash(value: tuple[Any, ...]) -> int:
        """``Row.hashCode`` as the key selector sees it: ``31 + deepHashCode(fields)``.

        ``deepHashCode`` as ``Arrays.hashCode`` (from 1, ``31 * h + hash(field)``).

        Checked against Flink's own ``KeyGroupRangeAssignment`` for every PyFlink ``Row(String)``
        and ``Row(Long)`` key in ../shared/flink-fixtures/keygroups.tsv (one-field rows, which
        PyFlink's ``key_by`` produces); rows of several fields follow the same rule, unverified.
        """
        if any(h is None for h in hashes):
            raise UnsupportedFormatError("no Java hash for this Row's field types")
        fields = java_list_hash(None if v is None else h(v)  # type: ignore[misc]
                                for h, v in zip(hashes, value, strict=True))
        return to_int32(31 + fields)

    return Codec(read, "tuple<" + ",".join(p.spec for p in parts) + ">", -1,
                 f"Row<{','.join(p.name for p in parts)}>", java_hash)
