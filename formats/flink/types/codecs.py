"""From a serializer snapshot to a :class:`Codec`: how statectl reads each Flink serializer.

:func:`codec_for` builds, from a parsed :class:`~formats.flink.types.snapshots.SerializerSnapshot`
tree, a reader of one value in Flink's byte layout (reference §6.4), the statectl type spec it
maps to, and Flink's ``getLength()`` (which decides the canonical savepoint key layout, §6.3).
This module holds the numbers, strings, Flink's ``Value`` types, windows and the composite
serializers (lists, maps, sets, ``NullableSerializer``, ``Either``, tuples, rows, TTL, timers,
the Scala API's ``Option``, case classes and collections); the richer types have modules of
their own in this folder (:mod:`~formats.flink.types.pojo`, :mod:`~formats.flink.types.temporal`,
:mod:`~formats.flink.types.arrays`, :mod:`~formats.flink.types.kryo`,
:mod:`~formats.flink.types.row_data`, Flink SQL's :mod:`~formats.flink.types.table_runtime` and
CEP's :mod:`~formats.flink.types.cep`). A serializer statectl does not know gets no codec: its
values stay raw bytes where their length is known (canonical savepoints, RocksDB) -- never a
crash.
"""

from __future__ import annotations

import struct
from typing import Any

from formats.flink.java.input import DataReader, utf16_units_to_str
from formats.flink.types.arrays import flagged_elements, generic_array_codec
from formats.flink.types.cep import CEP_CODECS
from formats.flink.types.codec import Codec
from formats.flink.types.flink_version import KRYO_MAJOR
from formats.flink.types.kryo import kryo_codec
from formats.flink.types.pojo import PojoSubclass, enum_codec, pojo_codec
from formats.flink.types.row_data import row_data_codec
from formats.flink.types.snapshots import MAX_NAME, NAME_PATTERN, SerializerSnapshot
from formats.flink.types.table_runtime import TABLE_CODECS
from formats.flink.types.temporal import TEMPORAL
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
from statecore.serializers import GLOBAL_WINDOW, VOID_NAMESPACE, parse_type
from statecore.ttl import TtlValue
from statecore.values import TimeWindow

__all__ = ["FLINK_VALUE_CLASSES", "PRIMITIVE_ARRAYS", "ROW_KINDS", "STRING_READ", "VOID_READ",
           "Codec", "RowWithKind", "codec_for", "opaque_spec", "pojo_subclasses", "row_legacy_mode",
           "why_undecodable"]


def _void(r: DataReader) -> Any:
    if r.u8():
        raise r.fail("bad void namespace byte")
    return VOID_NAMESPACE


VOID_READ = _void


def _char(r: DataReader) -> str:
    return chr(r.u16())


_string = DataReader.string_value
STRING_READ = _string


_new_window = tuple.__new__  # TimeWindow(...) runs Python code: this takes half the time


def _time_window(r: DataReader) -> TimeWindow:
    """``TimeWindow.Serializer``: ``long start``, ``long end`` (a ``tuple<int64,int64>``)."""
    return _new_window(TimeWindow, (r.i64(), r.i64()))


def _string_data(r: DataReader) -> str:
    raw = r.sized_bytes()
    return raw.decode("utf-8", "replace")


def _global_window(r: DataReader) -> str:
    if r.u8():
        raise r.fail("bad GlobalWindow byte")
    return GLOBAL_WINDOW


# GlobalWindow.hashCode() is 0; its Serializer's getLength() is 0 though it writes a byte
_GLOBAL_WINDOW = Codec(_global_window, "global_window", 0, "GlobalWindow",
                                 lambda _v: 0)


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
    "GlobalWindow": _GLOBAL_WINDOW,
}


def _string_value(r: DataReader) -> str:
    """``StringValue.read`` (``StringValueSerializer``): a length, then UTF-16 units.

    The length is a varint without ``+ 1`` (a ``StringValue`` is never null); each unit a varint.
    """
    length = r.varint()
    if length > r.remaining:
        raise r.fail(f"StringValue of {length} characters with {r.remaining} bytes left")
    data, pos = r.data, r.pos
    chunk = data[pos:pos + length]
    if chunk.isascii():  # one byte per character
        r.pos = pos + length
        return bytes(chunk).decode("ascii")
    return utf16_units_to_str([r.varint() for _ in range(length)])


#: Flink's ``Value`` serializers (``typeutils.base``): ``value.write(out)``, the layout of the
#: primitive's ``DataOutput`` write. No key hash: the ``Value`` classes' ``hashCode`` is their own
#: (``LongValue``'s is ``43 + ...``), not checked against Flink.
_VALUES: dict[str, Codec] = {
    "IntValueSerializer": Codec(DataReader.i32, "int32", 4, "IntValue", struct_code="i"),
    "LongValueSerializer": Codec(DataReader.i64, "int64", 8, "LongValue", struct_code="q"),
    "ShortValueSerializer": Codec(DataReader.i16, "int16", 2, "ShortValue", struct_code="h"),
    "ByteValueSerializer": Codec(DataReader.i8, "int8", 1, "ByteValue", struct_code="b"),
    "BooleanValueSerializer": Codec(DataReader.boolean, "bool", 1, "BooleanValue",
                                    struct_code="?"),
    "FloatValueSerializer": Codec(DataReader.f32, "float32", 4, "FloatValue", struct_code="f"),
    "DoubleValueSerializer": Codec(DataReader.f64, "float64", 8, "DoubleValue",
                                   struct_code="d"),
    "CharValueSerializer": Codec(_char, "char", 2, "CharValue"),
    "StringValueSerializer": Codec(_string_value, "string", -1, "StringValue"),
}

#: Flink's ``Value`` classes a ``ValueSerializer``/``CopyableValueSerializer`` may be of (the
#: same bytes as their own serializers'): class -> the serializer in :data:`_VALUES`.
FLINK_VALUE_CLASSES = {f"org.apache.flink.types.{name[:-len('Serializer')]}": name
                       for name in _VALUES}

#: Serializers of a type of one value, which no other statectl spec holds (``void`` is the
#: namespace only: it has no column): short snapshot class -> what it is. Their values are the
#: ``json`` spec's: ``Tuple0`` the empty array (a tuple of no fields), ``NullValue`` and Scala's
#: ``Unit`` null.
_NO_SPEC = {
    "NullValueSerializer": "NullValue (one value, written as no bytes)",
    "Tuple0SerializerSnapshot": "Tuple0 (one value, written as the byte 42)",
    "UnitSerializer": "Scala's Unit (one value, written as the byte 0)",
}


def _single(value: Any, byte: int | None, what: str) -> Codec:
    """A type of one value (:data:`_NO_SPEC`); ``byte`` is what Flink writes (``None``: nothing).

    Port of ``Tuple0Serializer.deserialize`` (``source.readByte()``; 42 is written),
    ``NullValueSerializer`` (nothing) and Scala's ``UnitSerializer`` (a byte 0).
    """
    def read(r: DataReader) -> Any:
        if byte is not None:
            pos = r.pos
            if pos >= r.end:
                raise r.fail(f"truncated: a {what} expected")
            if r.data[pos] != byte:
                raise r.fail(f"a {what} is the byte {byte}, not {r.data[pos]}")
            r.pos = pos + 1
        return [] if value == [] else value
    return Codec(read, "json", 0 if byte is None else 1, what, lambda _v: 0)


#: What Flink writes for the one value of each (``b""``: nothing).
SINGLE_VALUE_BYTES = {"NullValueSerializer": b"", "Tuple0SerializerSnapshot": b"\x2a",
                      "UnitSerializer": b"\x00"}
_SINGLES = {"NullValueSerializer": _single(None, None, "NullValue"),
            "Tuple0SerializerSnapshot": _single([], 42, "Tuple0"),
            "UnitSerializer": _single(None, 0, "Unit")}
#: Composite snapshots whose values may be ``None`` at the top: a Scala ``Option`` of one of
#: them would decode ``Some(None)`` and ``None`` alike.
_NULLABLE_COMPOSITES = frozenset({"ScalaOptionSerializerSnapshot",
                                  "NullableSerializer$NullableSerializerSnapshot"})


def codec_for(snapshot: SerializerSnapshot) -> Codec | None:
    """The codec of a serializer snapshot, or ``None`` when statectl cannot decode it.

    Never a codec whose spec statectl cannot hold (:func:`statecore.serializers.parse_type`
    refuses it: a spec too long or too deep).
    """
    codec = _codec_for(snapshot)
    return None if codec is None else _spec_checked(codec)


def _codec_for(snapshot: SerializerSnapshot) -> Codec | None:
    if snapshot.outer.get("unparsed"):  # a framed snapshot statectl could not read
        return None
    short = snapshot.short_name
    outer = short.split("$")[0]
    if outer in _BASIC:
        return _BASIC[outer]
    if outer in _VALUES:
        return _VALUES[outer]
    if outer in _SINGLES:
        return _SINGLES[outer]
    if outer in ("ValueSerializer", "CopyableValueSerializer"):  # only Flink's own Values
        value = FLINK_VALUE_CLASSES.get(snapshot.outer.get("class", ""))
        return None if value is None else _VALUES[value]
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
        return kryo_codec(snapshot.outer["class"], snapshot.outer["registrations"],
                          KRYO_MAJOR.get(),
                          serializers=snapshot.outer.get("registration_serializers"),
                          default_serializers=snapshot.outer.get("default_serializers", ()))
    sql = TABLE_CODECS.get(short) or CEP_CODECS.get(short)  # Flink SQL's and CEP's own
    if sql is not None:
        return sql(snapshot, codec_for)
    nested = [codec_for(n) for n in snapshot.nested]
    if any(c is None for c in nested):
        return None
    parts: list[Codec] = [c for c in nested if c is not None]
    if short == "PojoSerializerSnapshot" and parts:
        fields = list(zip(snapshot.outer["fields"], parts, strict=True))
        return pojo_codec(snapshot.outer["class"], fields,
                          snapshot.outer["registered_subclasses"], pojo_subclasses(snapshot))
    if short == "NullableSerializer$NullableSerializerSnapshot" and len(parts) == 1:
        return _nullable_codec(parts[0], snapshot.outer.get("padding", 0))
    if short == "SetSerializerSnapshot" and len(parts) == 1:
        return _set_codec(parts[0])
    if short in ("JavaEitherSerializerSnapshot", "EitherSerializerSnapshot",
                 "ScalaEitherSerializerSnapshot") and len(parts) == 2:
        return _either_codec(parts[0], parts[1])
    if short == "ScalaOptionSerializerSnapshot" and len(parts) == 1:
        if snapshot.nested[0].short_name in _NULLABLE_COMPOSITES:
            return None  # Some(None) and None would be one None
        return _option_codec(parts[0])
    if short in ("ScalaCaseClassSerializerSnapshot", "Tuple2CaseClassSerializerSnapshot") \
            and parts:
        return _tuple_codec(parts, snapshot.outer.get("class", "CaseClass"))
    if short == "TraversableSerializerSnapshot" and len(parts) == 1:
        return _traversable_codec(parts[0])
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


def pojo_subclasses(snapshot: SerializerSnapshot
                    ) -> list[tuple[PojoSubclass, Codec | None]]:
    """The subclasses in a POJO snapshot, each with the plain codec of its fields.

    Registered ones first (tag order), then the cached ones. A subclass whose serializer is not
    a POJO serializer statectl decodes has no fields (``PojoSubclass.why`` says why).
    """
    out: list[tuple[PojoSubclass, Codec | None]] = []
    for key, registered in (("registered", True), ("subclass", False)):
        names = snapshot.outer.get("registered_subclasses" if registered else "subclasses", ())
        snapshots = snapshot.outer.get(f"{key}_snapshots", ())
        for name, sub in zip(names, snapshots, strict=False):
            fields = _plain_pojo_fields(sub)
            if fields is None:
                why = (f"its serializer is {sub.describe()}" if sub.short_name !=
                       "PojoSerializerSnapshot" else why_undecodable(sub))
                out.append((PojoSubclass(name, registered, None, why), None))
                continue
            codec = pojo_codec(name, fields)
            out.append((PojoSubclass(name, registered, tuple((n, c.spec) for n, c in fields)),
                        codec))
    return out


def _plain_pojo_fields(snapshot: SerializerSnapshot) -> list[tuple[str, Codec]] | None:
    """A POJO snapshot's fields with their codecs, or ``None`` (not a POJO statectl decodes)."""
    if snapshot.short_name != "PojoSerializerSnapshot" or snapshot.outer.get("unparsed"):
        return None
    parts = [codec_for(n) for n in snapshot.nested]
    if not parts or any(c is None for c in parts):
        return None
    return [(name, c) for name, c in zip(snapshot.outer["fields"], parts, strict=True)
            if c is not None]


def why_undecodable(snapshot: SerializerSnapshot, where: str = "") -> str:
    """Which serializer in ``snapshot``'s tree statectl cannot decode, for messages."""
    if codec_for(snapshot) is not None:
        return ""
    built = _codec_for(snapshot)
    if built is not None:  # decodable, but its spec is more than statectl holds
        try:
            parse_type(built.spec)
        except StatectlError as exc:
            return (f"{where}{snapshot.describe()}: its type spec is not one statectl holds "
                    f"({exc})")
    short = snapshot.short_name
    base = short.split("$")[0]
    if base in _NO_SPEC:
        return (f"{where}serializer {snapshot.class_name}: {_NO_SPEC[base]}, which statectl has "
                f"no type spec for")
    if short == "ScalaOptionSerializerSnapshot" and snapshot.nested and \
            snapshot.nested[0].short_name in _NULLABLE_COMPOSITES:
        return (f"{where}a Scala Option of {snapshot.nested[0].describe()}: Some(None) and None "
                f"would be one null in statectl's spec")
    if base in ("ValueSerializer", "CopyableValueSerializer") and not snapshot.nested:
        return (f"{where}{base} of the user Value class {snapshot.outer.get('class')}: its bytes "
                f"are the class's own write(), which statectl cannot know")
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
    if not isinstance(name, str) or len(name) > MAX_NAME or not NAME_PATTERN.fullmatch(name):
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
#: by :mod:`formats.flink.types.encoders`).
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


def _read_flag(r: DataReader, truncated: str, name: str) -> int:
    """One ``boolean`` flag byte, 0 or 1 (Flink's ``writeBoolean`` writes no other).

    ``truncated`` is the error when no byte is left, ``name`` names the flag in a bad one's.
    """
    pos = r.pos
    if pos >= r.end:
        raise r.fail(truncated)
    flag = r.data[pos]
    r.pos = pos + 1
    if flag > 1:
        raise r.fail(f"{name} {flag}, expected 0 or 1")
    return flag


def _nullable_codec(inner: Codec, padding: int) -> Codec:
    """``NullableSerializer``: a ``boolean`` null flag, then the value or the padding.

    Null is ``true`` then ``padding`` bytes (the wrapped serializer's fixed length when Flink
    pads), a value ``false`` then the value.

    The spec is the wrapped serializer's (a null is ``None``); ``getLength()`` is ``1 +
    padding`` when padded, else variable. A flag byte other than 0 or 1 is refused as corrupt
    (Flink's ``writeBoolean`` writes no other).
    """
    read_inner = inner.read

    def read(r: DataReader) -> Any:
        if not _read_flag(r, "truncated: a NullableSerializer null flag expected",
                          "NullableSerializer null flag"):
            return read_inner(r)
        if padding:
            r.need(padding)
        return None

    return Codec(read, inner.spec, 1 + padding if padding else -1, inner.name, inner.java_hash)


def _set_codec(element: Codec) -> Codec:
    """``SetSerializer`` (Flink 2.x): an int count, then per element a null flag and it.

    The flag is a ``boolean`` (``true``: null). A set is a ``list<T>`` in Flink's iteration
    order.
    """
    read = flagged_elements(element.read, "set element", 0, "null flag")
    return Codec(read, f"list<{element.spec}>", -1, f"Set<{element.name}>")


def _either_codec(left: Codec, right: Codec) -> Codec:
    """``EitherSerializer``: a ``boolean`` (``true``: left), then the left or the right value.

    The spec is ``struct<left:L,right:R>``; the side that is not there is ``None`` (Flink's
    ``Either`` holds no null).
    """
    read_left, read_right = left.read, right.read

    def read(r: DataReader) -> dict[str, Any]:
        if _read_flag(r, "truncated: an Either's side flag expected", "Either side flag"):
            return {"left": read_left(r), "right": None}
        return {"left": None, "right": read_right(r)}

    return Codec(read, f"struct<left:{left.spec},right:{right.spec}>", -1,
                 f"Either<{left.name},{right.name}>")


def _option_codec(inner: Codec) -> Codec:
    """Scala's ``OptionSerializer`` (``flink-scala``): ``true`` then the value, or ``false``.

    The spec is the value's; ``None`` is Scala's ``None`` (a ``Some(null)`` of a serializer
    that writes nulls decodes as ``None`` too: statectl writes it back as ``None``).
    """
    read_inner = inner.read

    def read(r: DataReader) -> Any:
        if _read_flag(r, "truncated: a Scala Option's flag expected", "Scala Option flag"):
            return read_inner(r)
        return None

    return Codec(read, inner.spec, -1, f"Option<{inner.name}>")


def _traversable_codec(element: Codec) -> Codec:
    """Scala's ``TraversableSerializer``: an int count, per element a flag and the element.

    The flag is a ``boolean``, ``true`` when the element follows (the opposite of
    ``SetSerializer``'s). Any collection (a ``List``, a ``Map`` of ``Tuple2``) is a ``list<T>``.
    """
    read = flagged_elements(element.read, "collection element", 1, "flag")
    return Codec(read, f"list<{element.spec}>", -1, f"Traversable<{element.name}>")


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
