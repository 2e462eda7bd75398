"""Codecs of the types real Flink jobs keep in state, beyond numbers and strings.

Each reads one value in the layout of Flink's serializer (Flink 2.3, ``flink-core``'s
``org.apache.flink.api.common.typeutils.base`` and ``api.java.typeutils.runtime``) and returns the
Python value of its statectl type (:mod:`statecore.serializers`):

================================  ==================  =========================================
Flink serializer                  statectl spec       bytes
================================  ==================  =========================================
``PojoSerializer``                ``struct<...>``     flags byte (``1`` null, ``2`` this class,
                                                      ``4``/``8`` a subclass), then per field a
                                                      null byte and the field's bytes
``EnumSerializer``                ``enum<...>``       int32 index into the snapshot's constants
``InstantSerializer``             ``timestamp[ns]``   int64 epoch seconds, int32 nanos
``LocalDateSerializer``           ``date32``          int32 year, int8 month, int8 day
``LocalTimeSerializer``           ``local_time``      int8 hour, minute, second, int32 nanos
``LocalDateTimeSerializer``       ``local_datetime``  the date's 6 bytes, the time's 7
``SqlDate/SqlTime/DateSerial.``   ``timestamp[ms]``   int64 epoch milliseconds
``SqlTimestampSerializer``        ``timestamp[ns]``   int64 epoch milliseconds, int32 nanos
``BigIntSerializer``              ``bigint``          int32 length + 4 (0 null, 1..3: 0, 1, 10),
                                                      then two's-complement big-endian bytes
``BigDecSerializer``              ``decimal``         the unscaled ``BigInteger``, int32 scale
``GenericArraySerializer``        ``list<T>``         int32 length, per element a non-null byte
                                                      and the element
``KryoSerializer``                ``kryo<class>``     Kryo's bytes (no length: see below)
``GlobalWindow.Serializer``       ``global_window``   one 0 byte
================================  ==================  =========================================

Null markers are Flink's: ``Long.MIN_VALUE`` seconds with ``Integer.MIN_VALUE`` nanos (Instant),
``Integer.MIN_VALUE`` year (LocalDate), ``Byte.MIN_VALUE`` hour (LocalTime), ``Long.MIN_VALUE``
milliseconds (the ``java.util.Date`` family).

Kryo writes no length. Where Flink delimits a value (a canonical savepoint's or RocksDB's value,
an operator state element) its bytes are kept whole (:attr:`Codec.read_all`). Elsewhere (the
heap format) the value's end is known only from the Kryo serializer's own layout: statectl knows
it for the classes in :data:`KRYO_PAYLOAD` -- Kryo's class id (a varint), the reference marker
(a varint, 1 for a new object; Flink's ``KryoSerializer`` tracks references) and the payload of
Kryo 5's default serializer -- and refuses the others with a message naming the class.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Sequence
from typing import Any

from formats.flink.codec import Codec
from formats.flink.javaio import DataReader
from statecore.errors import UnsupportedFormatError
from statecore.hashing import (
    java_big_decimal_hash,
    java_big_integer_hash,
    java_instant_hash,
    java_local_date_hash,
    java_local_datetime_hash,
    java_local_time_hash,
    java_long_hash,
)
from statecore.serializers import GLOBAL_WINDOW, decimal_parts
from statecore.values import (
    NANOS_PER_DAY,
    NANOS_PER_SECOND,
    Instant,
    LocalDateTime,
    LocalTime,
    civil_from_days,
    days_from_civil,
)

__all__ = ["KRYO_PAYLOAD", "MAX_BIG_INTEGER_BYTES", "POJO_IS_NULL", "POJO_NO_SUBCLASS",
           "TEMPORAL", "enum_codec", "generic_array_codec", "kryo_codec", "pojo_codec"]

LONG_MIN = -(1 << 63)
INT_MIN = -(1 << 31)
#: Nanoseconds an Arrow ``timestamp[ns]`` holds (int64: 1677-09-21 to 2262-04-11).
_NS_LOW, _NS_HIGH = -(1 << 63), (1 << 63) - 1

#: ``PojoSerializer``'s flags (``IS_NULL``, ``NO_SUBCLASS``, ``IS_SUBCLASS``,
#: ``IS_TAGGED_SUBCLASS``).
POJO_IS_NULL, POJO_NO_SUBCLASS, POJO_IS_SUBCLASS, POJO_IS_TAGGED_SUBCLASS = 1, 2, 4, 8

_QI = struct.Struct(">qi")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_DATE = struct.Struct(">ibb")
_TIME = struct.Struct(">bbbi")


# -- POJOs and enums ----------------------------------------------------------------------


def pojo_codec(class_name: str, fields: Sequence[tuple[str, Codec]],
               subclasses: Sequence[str] = ()) -> Codec:
    """``PojoSerializer`` of ``class_name``: a dict of its fields, in the snapshot's order.

    Values of exactly the POJO class are decoded; a value of a subclass (flags ``4``: its class
    name follows; ``8``: the tag of a registered subclass, ``subclasses`` in tag order) is
    refused with its class named -- its fields are not the POJO's.
    """
    # per field: its name, its reader, and for a fixed-size primitive its struct (read in place)
    layout = [(name, codec.read,
               struct.Struct(">" + codec.struct_code) if codec.struct_code else None)
              for name, codec in fields]

    def read(r: DataReader) -> dict[str, Any] | None:
        data, pos, end = r.data, r.pos, r.end
        if pos >= end:
            raise r.fail(f"truncated: a {class_name} POJO expected")
        flags = data[pos]
        r.pos = pos = pos + 1
        if flags & POJO_IS_NULL:
            return None
        if flags & (POJO_IS_SUBCLASS | POJO_IS_TAGGED_SUBCLASS) or not flags & POJO_NO_SUBCLASS:
            raise _subclass(r, flags, class_name, subclasses)
        out: dict[str, Any] = {}
        for name, read_field, fixed in layout:
            if pos >= end:
                raise r.fail(f"truncated: field {name!r} of a {class_name} POJO expected")
            if data[pos]:  # the field's null flag
                out[name] = None
                r.pos = pos = pos + 1
            elif fixed is not None:
                after = pos + 1 + fixed.size
                if after > end:
                    r.pos = pos + 1
                    raise r.fail(f"truncated: {fixed.size} more bytes expected, "
                                 f"{end - pos - 1} left")
                out[name] = fixed.unpack_from(data, pos + 1)[0]
                r.pos = pos = after
            else:
                r.pos = pos + 1
                out[name] = read_field(r)
                pos = r.pos
        return out

    spec = "struct<" + ",".join(f"{name}:{codec.spec}" for name, codec in fields) + ">"
    return Codec(read, spec, -1, f"POJO {class_name}")


def _subclass(r: DataReader, flags: int, class_name: str, subclasses: Sequence[str]
              ) -> Exception:
    if flags & POJO_IS_SUBCLASS:
        what = f"class {r.utf()}"
    elif flags & POJO_IS_TAGGED_SUBCLASS:
        tag = r.u8()
        what = (f"registered subclass {subclasses[tag]}" if tag < len(subclasses)
                else f"registered subclass #{tag}")
    else:
        return r.fail(f"POJO flags {flags:#x} name no class")
    return UnsupportedFormatError(
        f"{r.where}: a value of {what}, a subclass of POJO {class_name}: statectl decodes "
        f"values of the POJO class itself (their fields are the snapshot's)")


def enum_codec(class_name: str, constants: Sequence[str]) -> Codec:
    """``EnumSerializer``: the constant whose index the int32 is, in the snapshot's order."""
    values = tuple(constants)
    n = len(values)

    def read(r: DataReader) -> str:
        pos = r.pos
        if pos + 4 > r.end:
            raise r.fail(f"truncated: 4 more bytes expected, {r.end - pos} left")
        index: int = _I.unpack_from(r.data, pos)[0]
        if not 0 <= index < n:
            raise r.fail(f"enum ordinal {index} is none of the {n} constants of {class_name}")
        r.pos = pos + 4
        return values[index]

    return Codec(read, "enum<" + ",".join(values) + ">", 4, f"enum {class_name}")


# -- java.time, java.sql, java.util.Date --------------------------------------------------


def _instant_ns(r: DataReader, nanos: int, what: str) -> Instant:
    if not _NS_LOW <= nanos <= _NS_HIGH:
        raise UnsupportedFormatError(
            f"{r.where}: the {what} {Instant(nanos)} is outside what a timestamp[ns] holds "
            f"(1677-09-21 to 2262-04-11)")
    return Instant(nanos)


def _read_instant(r: DataReader) -> Instant | None:
    pos = r.pos
    if pos + 12 > r.end:
        raise r.fail(f"truncated: 12 more bytes expected, {r.end - pos} left")
    seconds, nanos = _QI.unpack_from(r.data, pos)
    if not 0 <= nanos < NANOS_PER_SECOND:
        if seconds == LONG_MIN and nanos == INT_MIN:
            r.pos = pos + 12
            return None
        raise r.fail(f"an Instant's nanoseconds {nanos} outside 0..999999999")
    r.pos = pos + 12
    return _instant_ns(r, seconds * NANOS_PER_SECOND + nanos, "Instant")


def _date_parts(r: DataReader, pos: int) -> tuple[int, int, int] | None:
    year, month, day = _DATE.unpack_from(r.data, pos)
    if year == INT_MIN:
        return None
    if not 1 <= month <= 12 or not 1 <= day <= 31 or civil_from_days(
            days_from_civil(year, month, day)) != (year, month, day):
        raise r.fail(f"{year}-{month}-{day} is not a date")
    return year, month, day


def _read_local_date(r: DataReader) -> datetime.date | None:
    pos = r.pos
    if pos + 6 > r.end:
        raise r.fail(f"truncated: 6 more bytes expected, {r.end - pos} left")
    parts = _date_parts(r, pos)
    r.pos = pos + 6
    if parts is None:
        return None
    if not 1 <= parts[0] <= 9999:
        raise UnsupportedFormatError(f"{r.where}: the LocalDate {parts[0]}-{parts[1]:02d}-"
                                     f"{parts[2]:02d} is outside the years 1..9999 statectl "
                                     f"represents")
    return datetime.date(*parts)


def _time_nanos(r: DataReader, pos: int) -> int | None:
    hour, minute, second, nano = (int(x) for x in _TIME.unpack_from(r.data, pos))
    if hour == -128:
        return None
    if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60
            and 0 <= nano < NANOS_PER_SECOND):
        raise r.fail(f"{hour}:{minute}:{second}.{nano} is not a time of day")
    return (hour * 3600 + minute * 60 + second) * NANOS_PER_SECOND + nano


def _read_local_time(r: DataReader) -> LocalTime | None:
    pos = r.pos
    if pos + 7 > r.end:
        raise r.fail(f"truncated: 7 more bytes expected, {r.end - pos} left")
    nanos = _time_nanos(r, pos)
    r.pos = pos + 7
    return None if nanos is None else LocalTime(nanos)


def _read_local_datetime(r: DataReader) -> LocalDateTime | None:
    """``LocalDateTimeSerializer``: the date's bytes then the time's; null if either is."""
    pos = r.pos
    if pos + 13 > r.end:
        raise r.fail(f"truncated: 13 more bytes expected, {r.end - pos} left")
    parts = _date_parts(r, pos)
    nanos = _time_nanos(r, pos + 6)
    r.pos = pos + 13
    if parts is None or nanos is None:
        return None
    value = days_from_civil(*parts) * NANOS_PER_DAY + nanos
    if not _NS_LOW <= value <= _NS_HIGH:
        raise UnsupportedFormatError(f"{r.where}: the LocalDateTime {LocalDateTime(value)} is "
                                     f"outside what a timestamp[ns] holds (1677 to 2262)")
    return LocalDateTime(value)


def _read_millis(r: DataReader) -> Instant | None:
    """``SqlDateSerializer``, ``SqlTimeSerializer``, ``DateSerializer``: epoch ms."""
    pos = r.pos
    if pos + 8 > r.end:
        raise r.fail(f"truncated: 8 more bytes expected, {r.end - pos} left")
    r.pos = pos + 8
    millis = _Q.unpack_from(r.data, pos)[0]
    return None if millis == LONG_MIN else Instant(millis * 1_000_000)


def _read_sql_timestamp(r: DataReader) -> Instant | None:
    """``SqlTimestampSerializer``: ``getTime()`` (ms), ``getNanos()`` (of its second)."""
    pos = r.pos
    if pos + 8 > r.end:
        raise r.fail(f"truncated: 8 more bytes expected, {r.end - pos} left")
    millis = _Q.unpack_from(r.data, pos)[0]
    if pos + 12 > r.end:  # null is Long.MIN_VALUE and an int 0: 12 bytes as well
        raise r.fail(f"truncated: 12 more bytes expected, {r.end - pos} left")
    if millis == LONG_MIN:
        r.pos = pos + 12
        return None
    nanos = _I.unpack_from(r.data, pos + 8)[0]
    if not 0 <= nanos < NANOS_PER_SECOND:
        raise r.fail(f"a Timestamp's nanoseconds {nanos} outside 0..999999999")
    r.pos = pos + 12
    return _instant_ns(r, (millis // 1000) * NANOS_PER_SECOND + nanos, "Timestamp")


def _sql_timestamp_hash(value: Instant) -> int:
    """``java.sql.Timestamp.hashCode``: ``Date.hashCode`` of ``getTime()`` (ms incl. nanos)."""
    return java_long_hash(value.epoch_second * 1000 + value.nano // 1_000_000)


def _instant_hash(value: Instant) -> int:
    return java_instant_hash(value.epoch_second, value.nano)


def _date_hash(value: datetime.date) -> int:
    return java_local_date_hash(value.year, value.month, value.day)


def _datetime_hash(value: LocalDateTime) -> int:
    return java_local_datetime_hash(*civil_from_days(value.days), value.nano_of_day)


# -- BigInteger, BigDecimal ----------------------------------------------------------------


#: Largest ``BigInteger`` (bytes of its two's complement) statectl reads: its decimal text, the
#: ``bigint`` column's form, stays under Python's 4300-digit limit of int/str conversion.
MAX_BIG_INTEGER_BYTES = 1024


def _big_integer(r: DataReader) -> int | None:
    """``BigIntSerializer.readBigInteger``."""
    n = r.i32()
    if n < 4:
        if 0 <= n < 4:
            return (None, 0, 1, 10)[n]
        raise r.fail(f"impossible BigInteger length {n - 4}")
    if n == 4:
        raise r.fail("a BigInteger of no bytes")
    if n - 4 > MAX_BIG_INTEGER_BYTES:
        raise UnsupportedFormatError(f"{r.where}: a BigInteger of {n - 4} bytes, more than the "
                                     f"{MAX_BIG_INTEGER_BYTES} statectl reads")
    return int.from_bytes(r.raw(n - 4), "big", signed=True)


def _big_decimal(r: DataReader) -> decimal.Decimal | None:
    """``BigDecSerializer``: the unscaled value (null: the whole value), then the scale."""
    unscaled = _big_integer(r)
    if unscaled is None:
        return None
    scale = r.i32()
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return decimal.Decimal((int(unscaled < 0), digits, -scale))


#: Serializers (outer class name) -> codec. ``getLength()`` as Flink's.
TEMPORAL: dict[str, Codec] = {
    "InstantSerializer": Codec(_read_instant, "timestamp[ns]", 12, "Instant", _instant_hash),
    "LocalDateSerializer": Codec(_read_local_date, "date32", 6, "LocalDate", _date_hash),
    "LocalTimeSerializer": Codec(_read_local_time, "local_time", 7, "LocalTime",
                                 lambda v: java_local_time_hash(v.nano_of_day)),
    "LocalDateTimeSerializer": Codec(_read_local_datetime, "local_datetime", 13,
                                     "LocalDateTime", _datetime_hash),
    "SqlDateSerializer": Codec(_read_millis, "timestamp[ms]", 8, "java.sql.Date",
                               lambda v: java_long_hash(v.epoch_milli)),
    "SqlTimeSerializer": Codec(_read_millis, "timestamp[ms]", 8, "java.sql.Time",
                               lambda v: java_long_hash(v.epoch_milli)),
    "DateSerializer": Codec(_read_millis, "timestamp[ms]", 8, "java.util.Date",
                            lambda v: java_long_hash(v.epoch_milli)),
    "SqlTimestampSerializer": Codec(_read_sql_timestamp, "timestamp[ns]", 12,
                                    "java.sql.Timestamp", _sql_timestamp_hash),
    "BigIntSerializer": Codec(_big_integer, "bigint", -1, "BigInteger", java_big_integer_hash),
    "BigDecSerializer": Codec(_big_decimal, "decimal", -1, "BigDecimal",
                              lambda v: java_big_decimal_hash(*decimal_parts(v))),
}


def _global_window(r: DataReader) -> str:
    if r.u8():
        raise r.fail("bad GlobalWindow byte")
    return GLOBAL_WINDOW


# GlobalWindow.hashCode() is 0; its Serializer's getLength() is 0 though it writes a byte
TEMPORAL["GlobalWindow"] = Codec(_global_window, "global_window", 0, "GlobalWindow",
                                 lambda _v: 0)


# -- arrays ----------------------------------------------------------------------------------


def generic_array_codec(component_class: str, element: Codec) -> Codec:
    """``GenericArraySerializer``: an int32 length, per element a non-null byte then it.

    A Java array's ``hashCode`` is its identity: no key hash.
    """
    read_element = element.read

    def read(r: DataReader) -> list[Any]:
        n = r.count("array elements")
        out: list[Any] = []
        data = r.data
        for _ in range(n):
            pos = r.pos
            if pos >= r.end:
                raise r.fail("truncated: an array element expected")
            r.pos = pos + 1
            out.append(read_element(r) if data[pos] else None)
        return out

    return Codec(read, f"list<{element.spec}>", -1, f"{component_class}[]")


# -- Kryo ------------------------------------------------------------------------------------


#: Classes whose Kryo bytes statectl can delimit: payload bytes of Kryo 5's default serializer
#: after the class id and reference marker (``DefaultSerializers.UUIDSerializer``: two longs).
KRYO_PAYLOAD: dict[str, int] = {"java.util.UUID": 16}


def kryo_codec(class_name: str) -> Codec:
    """``KryoSerializer`` of ``class_name`` (the snapshot's type class): Kryo's bytes, whole.

    Never decoded further: the class ids in them depend on the job's Kryo registrations.
    """
    payload = KRYO_PAYLOAD.get(class_name)

    def read_all(r: DataReader) -> bytes:
        return r.raw(r.remaining)

    def read(r: DataReader) -> bytes:
        if payload is None:
            raise UnsupportedFormatError(
                f"{r.where}: a Kryo-serialized {class_name}: Kryo writes no length and statectl "
                f"does not know the layout of Kryo's serializer for {class_name}, so it cannot "
                f"find the value's end here (canonical savepoints and RocksDB delimit it: its "
                f"bytes are kept there)")
        start = r.pos
        tag = r.varint()  # Kryo class id + 2; 0 is null, 1 a class written by its name
        if tag == 0:
            return r.data[start:r.pos]
        if tag == 1:
            raise UnsupportedFormatError(f"{r.where}: a Kryo value of a class written by name "
                                         f"where a {class_name} is declared")
        marker = r.varint()
        if marker != 1:
            raise r.fail(f"Kryo reference marker {marker} where a new {class_name} (1) "
                         f"is expected")
        r.need(payload)
        return r.data[start:r.pos]

    return Codec(read, f"kryo<{class_name}>", -1, f"Kryo {class_name}", read_all=read_all)

