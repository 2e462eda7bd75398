"""Writing values in Flink's byte layouts: the mirror of the codecs' readers.

:func:`encoder_for` builds, for a serializer snapshot, an :data:`Encoder` that appends one value
in the bytes the serializer writes -- for every serializer whose values
:func:`formats.flink.types.codecs.codec_for` decodes, so a decoded value encodes back to the
bytes Flink wrote (tests check every fixture pair, and Flink restores what statectl writes).
Each encoder names the Flink class whose ``serialize`` it ports (Flink 2.3; ``flink-core``'s
``api.common.typeutils.base`` and ``api.java.typeutils.runtime`` unless said otherwise).

Two kinds of value are written back as they were read, not re-encoded:

- ``RowData`` values keep the ``BinaryRowData`` they were read from;
- values statectl keeps as bytes -- Kryo's (``kryo<class>``) and those of serializers it cannot
  decode (``opaque<class>``, no codec) -- are their stored bytes, written verbatim (Flink
  delimited them, so they are the value's whole serialized form).

One form is chosen where Flink's own choice depends on Java object identity: ``BigIntSerializer``
writes ``0``, ``1`` and ``10`` in a short form only for the ``BigInteger.ZERO``/``ONE``/``TEN``
constants (``==``, not ``equals``), which a decoded number no longer tells. statectl writes the
short form -- what Flink writes for ``BigInteger.valueOf`` values and for every such value it
read in the short form -- so a value Flink had written in the long form comes back 4 bytes
shorter, the same value to Flink. ``BigDecSerializer`` writes a ``BigDecimal``'s unscaled value
with the same helper, where the short form is what Flink writes (``unscaledValue()`` of a
compact decimal is ``BigInteger.valueOf``).

A serializer statectl cannot decode has no encoder (``None``): the writer keeps such values as
the raw bytes Flink delimited, and refuses such keys.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable, Sequence
from typing import Any

from formats.flink.javaout import string_value_bytes
from formats.flink.types.codecs import PRIMITIVE_ARRAYS, ROW_KINDS, codec_for, row_legacy_mode
from formats.flink.types.pojo import POJO_IS_NULL, POJO_NO_SUBCLASS
from formats.flink.types.row_data import RowDataTuple
from formats.flink.types.snapshots import SerializerSnapshot
from statecore.errors import InvalidArgumentError
from statecore.serializers import GLOBAL_WINDOW, decimal_parts
from statecore.ttl import TtlValue
from statecore.values import NANOS_PER_SECOND, Instant, LocalDateTime, LocalTime, civil_from_days

__all__ = ["Encoder", "encoder_for", "raw_encoder", "timer_key_encoder"]

#: Appends one value's bytes.
Encoder = Callable[[bytearray, Any], None]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_QI = struct.Struct(">qi")
_DATE = struct.Struct(">ibb")
_TIME = struct.Struct(">bbbi")
_SIGN = -1 << 63
LONG_MIN = -(1 << 63)
INT_MIN = -(1 << 31)


def _packer(packer: struct.Struct, kind: type) -> Encoder:
    pack = packer.pack

    def write(out: bytearray, value: Any) -> None:
        if type(value) is not kind and not (kind is float and type(value) is int):
            raise InvalidArgumentError(f"{value!r} is not a {kind.__name__}")
        out += pack(value)
    return write


def _string(out: bytearray, value: Any) -> None:
    if value is not None and type(value) is not str:
        raise InvalidArgumentError(f"{value!r} is not a string")
    out += string_value_bytes(value)


def _bool(out: bytearray, value: Any) -> None:
    if type(value) is not bool:
        raise InvalidArgumentError(f"{value!r} is not a boolean")
    out.append(1 if value else 0)


def _char(out: bytearray, value: Any) -> None:
    if type(value) is not str or len(value) != 1 or ord(value) > 0xFFFF:
        raise InvalidArgumentError(f"{value!r} is not a char (one UTF-16 code unit)")
    out += _U16.pack(ord(value))


def _bytes(out: bytearray, value: Any) -> None:
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not bytes")
    out += _I32.pack(len(value))
    out += value


def _void(out: bytearray, value: Any) -> None:
    out.append(0)


def _time_window(out: bytearray, value: Any) -> None:
    """``TimeWindow.Serializer`` (flink-runtime): ``long start``, ``long end``."""
    start, end = value
    out += _I64.pack(start)
    out += _I64.pack(end)


def _global_window(out: bytearray, value: Any) -> None:
    """``GlobalWindow.Serializer`` (flink-runtime): one ``0`` byte."""
    if value != GLOBAL_WINDOW:
        raise InvalidArgumentError(f"{value!r} is not the global window")
    out.append(0)


def _string_data(out: bytearray, value: Any) -> None:
    data = value.encode("utf-8")
    out += _I32.pack(len(data))
    out += data


def raw_encoder(out: bytearray, value: Any) -> None:
    """A value statectl kept as the bytes Flink delimited (an unknown serializer's): as is."""
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not the raw bytes of a value")
    out += value


# -- java.time, java.sql, java.util.Date ----------------------------------------------------


def _instant(out: bytearray, value: Any) -> None:
    """``InstantSerializer``: ``long epochSecond``, ``int nano``.

    Null: ``Long.MIN_VALUE``, ``Integer.MIN_VALUE``.
    """
    if value is None:
        out += _QI.pack(LONG_MIN, INT_MIN)
        return
    if not isinstance(value, Instant):
        raise InvalidArgumentError(f"{value!r} is not an Instant")
    out += _QI.pack(value.epoch_second, value.nano)


def _local_date(out: bytearray, value: Any) -> None:
    """``LocalDateSerializer``: ``int year``, ``byte month``, ``byte day``.

    Null: ``Integer.MIN_VALUE``, ``Short.MIN_VALUE``.
    """
    if value is None:
        out += _I32.pack(INT_MIN)
        out += _I16.pack(-(1 << 15))
        return
    if type(value) is not datetime.date:
        raise InvalidArgumentError(f"{value!r} is not a LocalDate")
    out += _DATE.pack(value.year, value.month, value.day)


def _local_time(out: bytearray, value: Any) -> None:
    """``LocalTimeSerializer``: ``byte hour, minute, second``, ``int nano``.

    Null: ``Byte.MIN_VALUE``, ``Short.MIN_VALUE``, ``Integer.MIN_VALUE``.
    """
    if value is None:
        out.append(0x80)
        out += _I16.pack(-(1 << 15))
        out += _I32.pack(INT_MIN)
        return
    if not isinstance(value, LocalTime):
        raise InvalidArgumentError(f"{value!r} is not a LocalTime")
    seconds, nano = divmod(value.nano_of_day, NANOS_PER_SECOND)
    out += _TIME.pack(seconds // 3600, seconds // 60 % 60, seconds % 60, nano)


def _local_datetime(out: bytearray, value: Any) -> None:
    """``LocalDateTimeSerializer``: the date's bytes, then the time's; null: both null."""
    if value is None:
        _local_date(out, None)
        _local_time(out, None)
        return
    if not isinstance(value, LocalDateTime):
        raise InvalidArgumentError(f"{value!r} is not a LocalDateTime")
    out += _DATE.pack(*civil_from_days(value.days))
    _local_time(out, LocalTime(value.nano_of_day))


def _millis(out: bytearray, value: Any) -> None:
    """``SqlDateSerializer``, ``SqlTimeSerializer``, ``DateSerializer``: ``long getTime()``.

    Null: ``Long.MIN_VALUE``. The instant must be of whole milliseconds (as decoded).
    """
    if value is None:
        out += _I64.pack(LONG_MIN)
        return
    if not isinstance(value, Instant) or value.epoch_nanos % 1_000_000:
        raise InvalidArgumentError(f"{value!r} is not an instant of whole milliseconds")
    out += _I64.pack(value.epoch_milli)


def _sql_timestamp(out: bytearray, value: Any) -> None:
    """``SqlTimestampSerializer``: ``long getTime()``, ``int getNanos()``.

    ``getTime()`` is milliseconds, the fraction's milliseconds included; ``getNanos()`` the
    nanoseconds of its second. Null: ``Long.MIN_VALUE`` and ``0``.
    """
    if value is None:
        out += _QI.pack(LONG_MIN, 0)
        return
    if not isinstance(value, Instant):
        raise InvalidArgumentError(f"{value!r} is not a Timestamp's instant")
    out += _QI.pack(value.epoch_second * 1000 + value.nano // 1_000_000, value.nano)


# -- BigInteger, BigDecimal -----------------------------------------------------------------

#: ``BigIntSerializer.writeBigInteger``'s short forms (``int`` only, no bytes).
_BIG_SHORT = {0: 1, 1: 2, 10: 3}


def _write_big_integer(out: bytearray, value: int | None) -> None:
    """``BigIntSerializer.writeBigInteger``: ``int length + 4`` then ``toByteArray()``.

    ``0`` is null; ``1``, ``2``, ``3`` are ``0``, ``1``, ``10`` (see the module doc);
    ``toByteArray()`` is the minimal two's complement, big-endian.
    """
    if value is None:
        out += _I32.pack(0)
        return
    short = _BIG_SHORT.get(value)
    if short is not None:
        out += _I32.pack(short)
        return
    bits = value.bit_length() if value >= 0 else (~value).bit_length()
    size = bits // 8 + 1  # BigInteger.toByteArray: bitLength() / 8 + 1 bytes
    out += _I32.pack(size + 4)
    out += value.to_bytes(size, "big", signed=True)


def _big_integer(out: bytearray, value: Any) -> None:
    """``BigIntSerializer``."""
    if value is not None and (type(value) is not int):
        raise InvalidArgumentError(f"{value!r} is not an integer")
    _write_big_integer(out, value)


def _big_decimal(out: bytearray, value: Any) -> None:
    """``BigDecSerializer``: the unscaled value as ``writeBigInteger``, then ``int scale``.

    Null: ``writeBigInteger(null)`` alone.
    """
    if value is None:
        _write_big_integer(out, None)
        return
    if not isinstance(value, decimal.Decimal):
        raise InvalidArgumentError(f"{value!r} is not a decimal")
    unscaled, scale = decimal_parts(value)
    _write_big_integer(out, unscaled)
    out += _I32.pack(scale)


_BASIC: dict[str, Encoder] = {
    "StringSerializer": _string,
    "IntSerializer": _packer(_I32, int),
    "LongSerializer": _packer(_I64, int),
    "ShortSerializer": _packer(_I16, int),
    "ByteSerializer": _packer(_I8, int),
    "BooleanSerializer": _bool,
    "FloatSerializer": _packer(_F32, float),
    "DoubleSerializer": _packer(_F64, float),
    "CharSerializer": _char,
    "BytePrimitiveArraySerializer": _bytes,
    "ByteArrayWrapperSerializer": _bytes,
    "VoidNamespaceSerializer": _void,
    "TimeWindow": _time_window,
    "StringDataSerializer": _string_data,
    # the mirror of formats.flink.types.temporal.TEMPORAL
    "InstantSerializer": _instant,
    "LocalDateSerializer": _local_date,
    "LocalTimeSerializer": _local_time,
    "LocalDateTimeSerializer": _local_datetime,
    "SqlDateSerializer": _millis,
    "SqlTimeSerializer": _millis,
    "DateSerializer": _millis,
    "SqlTimestampSerializer": _sql_timestamp,
    "BigIntSerializer": _big_integer,
    "BigDecSerializer": _big_decimal,
    "GlobalWindow": _global_window,
}


def encoder_for(snapshot: SerializerSnapshot) -> Encoder | None:
    """The encoder of a serializer snapshot, or ``None`` when statectl cannot write its values.

    Mirrors :func:`formats.flink.types.codecs.codec_for` case by case: a snapshot has an encoder
    exactly when it has a codec (a Kryo snapshot's encoder writes the kept bytes).
    """
    if codec_for(snapshot) is None:
        return None
    return _encoder(snapshot)


def _encoder(snapshot: SerializerSnapshot) -> Encoder | None:
    short = snapshot.short_name
    outer = short.split("$")[0]
    if outer in _BASIC:
        return _BASIC[outer]
    if outer in PRIMITIVE_ARRAYS:
        return _list(_BASIC[PRIMITIVE_ARRAYS[outer]])
    if short.startswith("RowDataSerializer$"):
        return _row_data
    if short == "EnumSerializer$EnumSerializerSnapshot":
        return _enum(snapshot.outer["class"], snapshot.outer["constants"])
    if short == "KryoSerializerSnapshot":
        return _kept_bytes
    nested = [_encoder(n) for n in snapshot.nested]
    if any(e is None for e in nested):
        return None
    parts: list[Encoder] = [e for e in nested if e is not None]
    if short == "PojoSerializerSnapshot" and parts:
        return _pojo(snapshot.outer["class"], snapshot.outer["fields"], parts)
    if short.startswith("GenericArraySerializerSnapshot") and len(parts) == 1:
        return _generic_array(parts[0])
    if short == "ListSerializerSnapshot" and len(parts) == 1:
        return _list(parts[0])
    if short == "MapSerializerSnapshot" and len(parts) == 2:
        return _map(parts[0], parts[1])
    if short.startswith("TtlStateFactory$TtlSerializerSnapshot") and len(parts) == 2:
        return _ttl(parts[0], parts[1])
    if short.startswith("TupleSerializerSnapshot") and parts:
        return _tuple(parts)
    if short == "TimerSerializerSnapshot" and len(parts) == 2:
        return timer_key_encoder(parts[0], parts[1])
    if short.startswith("RowSerializer$") and parts:
        return _row(parts, row_legacy_mode(snapshot))
    if short.startswith("ExternalSerializer$") and len(parts) == 1:
        return parts[0]
    return None


# -- composites -----------------------------------------------------------------------------


def _list(element: Encoder) -> Encoder:
    """``ListSerializer``: an int count, then the elements."""
    def write(out: bytearray, value: Any) -> None:
        out += _I32.pack(len(value))
        for e in value:
            element(out, e)
    return write


def _generic_array(element: Encoder) -> Encoder:
    """``GenericArraySerializer``: ``int length``, then per element a non-null flag.

    The flag is a ``boolean``, true when the element follows.
    """
    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, list | tuple):
            raise InvalidArgumentError(f"{value!r} is not an array")
        out += _I32.pack(len(value))
        for e in value:
            if e is None:
                out.append(0)
            else:
                out.append(1)
                element(out, e)
    return write


def _map(key: Encoder, value_encoder: Encoder) -> Encoder:
    """``MapSerializer``: an int count, then per entry the key, a null flag, the value."""
    def write(out: bytearray, value: Any) -> None:
        out += _I32.pack(len(value))
        for k, v in value.items():
            key(out, k)
            if v is None:
                out.append(1)
            else:
                out.append(0)
                value_encoder(out, v)
    return write


def _tuple(parts: list[Encoder]) -> Encoder:
    """``TupleSerializer``: the fields back to back.

    No null flags: Flink refuses a null field with ``NullFieldException``.
    """
    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, tuple | list) or len(value) != len(parts):
            raise InvalidArgumentError(f"{value!r} has not {len(parts)} fields")
        for part, field in zip(parts, value, strict=True):
            if field is None:
                raise InvalidArgumentError(f"{value!r}: a Flink tuple has no null fields")
            part(out, field)
    return write


def _ttl(timestamp: Encoder, user_value: Encoder) -> Encoder:
    """``TtlStateFactory.TtlSerializer``: the last-access timestamp, then the user value.

    A ``CompositeSerializer`` (flink-runtime) of the ``long`` timestamp and the value's
    serializer. Values are ``TtlValue``.
    """
    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, TtlValue):
            raise InvalidArgumentError(f"{value!r} is not a TtlValue")
        timestamp(out, value.last_access_timestamp)
        user_value(out, value.user_value)
    return write


def timer_key_encoder(key: Encoder, namespace: Encoder) -> Encoder:
    """``TimerSerializer``: the timestamp with its sign bit flipped, the key, the namespace.

    The value is ``(timestamp, key, namespace)``, as the codec reads it.
    """
    def write(out: bytearray, value: Any) -> None:
        timestamp, k, ns = value
        out += _I64.pack(timestamp ^ _SIGN)  # MathUtils.flipSignBit
        key(out, k)
        namespace(out, ns)
    return write


def _pojo(class_name: str, fields: Sequence[str], parts: list[Encoder]) -> Encoder:
    """``PojoSerializer``: the flags byte, then per field a null flag and the field.

    Fields in the snapshot's order; the null flag is a ``boolean``. A value is a dict of
    exactly the snapshot's fields, written with flags ``NO_SUBCLASS`` (``2``): the value's
    class is the POJO's (the only one statectl decodes); null is flags ``IS_NULL`` (``1``)
    alone.
    """
    layout = list(zip(fields, parts, strict=True))
    names = frozenset(fields)

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out.append(POJO_IS_NULL)
            return
        if not isinstance(value, dict) or value.keys() != names:
            raise InvalidArgumentError(f"{value!r} is not a {class_name} POJO (fields "
                                       f"{', '.join(fields)})")
        out.append(POJO_NO_SUBCLASS)
        for name, part in layout:
            field = value[name]
            if field is None:
                out.append(1)
            else:
                out.append(0)
                part(out, field)
    return write


def _enum(class_name: str, constants: Sequence[str]) -> Encoder:
    """``EnumSerializer``: ``int`` the constant's index in the snapshot's list.

    The restored serializer's ``valueToOrdinal`` is that index.
    """
    index = {name: i for i, name in enumerate(constants)}

    def write(out: bytearray, value: Any) -> None:
        at = index.get(value) if type(value) is str else None
        if at is None:
            raise InvalidArgumentError(f"{value!r} is no constant of enum {class_name}")
        out += _I32.pack(at)
    return write


def _kept_bytes(out: bytearray, value: Any) -> None:
    """``KryoSerializer``: the Kryo bytes statectl kept (read as Flink delimited them)."""
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not the kept bytes of a Kryo value")
    out += value


def _row(parts: list[Encoder], legacy: bool) -> Encoder:
    """``RowSerializer`` (position based): a bit mask, then the non-null fields.

    ``MaskUtils.writeMask`` of the row kind's two bits (unless legacy) and a null bit per
    field, most significant bit first. The kind is the value's ``RowWithKind.kind``,
    ``INSERT`` (0) for a plain tuple.
    """
    offset = 0 if legacy else 2
    mask_bytes = (len(parts) + offset + 7) // 8
    total = mask_bytes * 8

    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, tuple | list) or len(value) != len(parts):
            raise InvalidArgumentError(f"{value!r} has not {len(parts)} fields")
        kind = getattr(value, "kind", 0)
        if kind not in ROW_KINDS or (legacy and kind):
            raise InvalidArgumentError(f"row kind {kind!r} cannot be written here")
        mask = 0
        if offset:  # fillMask: mask[0] = kind & 1, mask[1] = kind & 2
            mask = (kind & 1) << (total - 1) | (kind >> 1 & 1) << (total - 2)
        for i, field in enumerate(value):
            if field is None:
                mask |= 1 << (total - 1 - offset - i)
        out += mask.to_bytes(mask_bytes, "big")
        for part, field in zip(parts, value, strict=True):
            if field is not None:
                part(out, field)
    return write


def _row_data(out: bytearray, value: Any) -> None:
    """``RowDataSerializer``: ``int size`` then the ``BinaryRowData`` the value was read from."""
    if not isinstance(value, RowDataTuple):
        raise InvalidArgumentError("a RowData value can only be written as the binary row it "
                                   "was read from")
    out += _I32.pack(len(value.binary))
    out += value.binary

