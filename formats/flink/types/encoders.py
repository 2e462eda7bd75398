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

from formats.flink.java.output import string_value_bytes as _string_value_bytes
from formats.flink.types.cep import CEP_ENCODERS
from formats.flink.types.codecs import (
    FLINK_VALUE_CLASSES,
    PRIMITIVE_ARRAYS,
    ROW_KINDS,
    SINGLE_VALUE_BYTES,
    codec_for,
    pojo_subclasses,
    row_legacy_mode,
)
from formats.flink.types.flink_version import KRYO_MAJOR
from formats.flink.types.kryo import kryo_encoder
from formats.flink.types.pojo import (
    CLASS_FIELD,
    POJO_IS_NULL,
    POJO_IS_SUBCLASS,
    POJO_IS_TAGGED_SUBCLASS,
    POJO_NO_SUBCLASS,
    pojo_subclass_union,
)
from formats.flink.types.row_data import row_data_encoder
from formats.flink.types.snapshots import SerializerSnapshot
from formats.flink.types.table_runtime import TABLE_ENCODERS
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
    out += _string_value_bytes(value)


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


def _string_value(out: bytearray, value: Any) -> None:
    """``StringValue.write`` (``StringValueSerializer``): a length, then UTF-16 units.

    The length is a varint without ``+ 1``, each unit a varint; never null.
    """
    if type(value) is not str:
        raise InvalidArgumentError(f"{value!r} is not a string (a StringValue is never null)")
    units = value.encode("utf-16-be", "surrogatepass")
    _varint(out, len(units) // 2)
    for i in range(0, len(units), 2):
        _varint(out, units[i] << 8 | units[i + 1])


def _varint(out: bytearray, value: int) -> None:
    """``StringValue``'s variable-length int: 7 bits a byte, low group first."""
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


#: The mirror of ``formats.flink.types.codecs._VALUES`` (``value.write(out)``).
_VALUES: dict[str, Encoder] = {
    "IntValueSerializer": _packer(_I32, int),
    "LongValueSerializer": _packer(_I64, int),
    "ShortValueSerializer": _packer(_I16, int),
    "ByteValueSerializer": _packer(_I8, int),
    "BooleanValueSerializer": _bool,
    "FloatValueSerializer": _packer(_F32, float),
    "DoubleValueSerializer": _packer(_F64, float),
    "CharValueSerializer": _char,
    "StringValueSerializer": _string_value,
}


def _encoder(snapshot: SerializerSnapshot) -> Encoder | None:
    short = snapshot.short_name
    outer = short.split("$")[0]
    if outer in _BASIC:
        return _BASIC[outer]
    if outer in _VALUES:
        return _VALUES[outer]
    if outer in SINGLE_VALUE_BYTES:  # Tuple0Serializer.serialize writes 42, Unit a 0, ...
        written = SINGLE_VALUE_BYTES[outer]

        def single(out: bytearray, value: Any) -> None:
            out += written
        return single
    if outer in ("ValueSerializer", "CopyableValueSerializer"):
        value = FLINK_VALUE_CLASSES.get(snapshot.outer.get("class", ""))
        return None if value is None else _VALUES[value]
    if outer in PRIMITIVE_ARRAYS:
        return _list(_BASIC[PRIMITIVE_ARRAYS[outer]])
    if short.startswith("RowDataSerializer$"):
        return row_data_encoder(snapshot.java_objects)
    sql = TABLE_ENCODERS.get(short) or CEP_ENCODERS.get(short)  # Flink SQL's and CEP's own
    if sql is not None:
        return sql(snapshot, _encoder)
    if short == "EnumSerializer$EnumSerializerSnapshot":
        return _enum(snapshot.outer["class"], snapshot.outer["constants"])
    if short == "KryoSerializerSnapshot":  # decoded values written back; kept bytes as they are
        return kryo_encoder(snapshot.outer["class"], snapshot.outer["registrations"],
                            KRYO_MAJOR.get(),
                            serializers=snapshot.outer.get("registration_serializers"),
                            default_serializers=snapshot.outer.get("default_serializers", ()))
    nested = [_encoder(n) for n in snapshot.nested]
    if any(e is None for e in nested):
        return None
    parts: list[Encoder] = [e for e in nested if e is not None]
    if short == "PojoSerializerSnapshot" and parts:
        plain = _pojo(snapshot.outer["class"], snapshot.outer["fields"], parts)
        subclasses = pojo_subclasses(snapshot)
        if not subclasses:
            return plain
        return _pojo_with_subclasses(snapshot, plain, subclasses)
    if short == "NullableSerializer$NullableSerializerSnapshot" and len(parts) == 1:
        return _nullable(parts[0], snapshot.outer.get("padding", 0))
    if short == "SetSerializerSnapshot" and len(parts) == 1:
        return _set(parts[0])
    if short in ("JavaEitherSerializerSnapshot", "EitherSerializerSnapshot",
                 "ScalaEitherSerializerSnapshot") and len(parts) == 2:
        return _either(parts[0], parts[1])
    if short == "ScalaOptionSerializerSnapshot" and len(parts) == 1:
        return _option(parts[0])
    if short in ("ScalaCaseClassSerializerSnapshot", "Tuple2CaseClassSerializerSnapshot") \
            and parts:
        return _case_class(parts)
    if short == "TraversableSerializerSnapshot" and len(parts) == 1:
        return _traversable(parts[0])
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


def _null_flagged(inner: Encoder, null: int) -> Encoder:
    """A flag byte, then the value unless it is ``None``: the flag is ``null`` for ``None``.

    Flink's ``boolean`` flags of a value that may be null: ``1`` (``true``) for null in
    ``MapSerializer``, ``PojoSerializer`` and ``SetSerializer``; ``0`` (``false``) in
    ``GenericArraySerializer`` and Scala's ``TraversableSerializer`` and ``OptionSerializer``.
    """
    present = 1 - null

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out.append(null)
        else:
            out.append(present)
            inner(out, value)
    return write


def _flagged_elements(element: Encoder, null: int, what: str) -> Encoder:
    """``int size``, then per element a flag and the element (:func:`_null_flagged`).

    What ``GenericArraySerializer`` and Scala's ``TraversableSerializer`` write (``null`` 0:
    the flag is ``true`` when the element follows) and ``SetSerializer`` (``null`` 1). The value
    is a list or tuple (``what`` names it in the error).
    """
    flagged = _null_flagged(element, null)

    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, list | tuple):
            raise InvalidArgumentError(f"{value!r} is not {what}")
        out += _I32.pack(len(value))
        for e in value:
            flagged(out, e)
    return write


def _check_fields(value: Any, count: int) -> None:
    """A tuple, case class or row value: a tuple or list of ``count`` fields."""
    if not isinstance(value, tuple | list) or len(value) != count:
        raise InvalidArgumentError(f"{value!r} has not {count} fields")


def _generic_array(element: Encoder) -> Encoder:
    """``GenericArraySerializer``: ``int length``, then per element a non-null flag.

    The flag is a ``boolean``, true when the element follows.
    """
    return _flagged_elements(element, 0, "an array")


def _map(key: Encoder, value_encoder: Encoder) -> Encoder:
    """``MapSerializer``: an int count, then per entry the key, a null flag, the value."""
    flagged = _null_flagged(value_encoder, 1)

    def write(out: bytearray, value: Any) -> None:
        out += _I32.pack(len(value))
        for k, v in value.items():
            key(out, k)
            flagged(out, v)
    return write


def _tuple(parts: list[Encoder]) -> Encoder:
    """``TupleSerializer``: the fields back to back.

    No null flags: a null field is written by its own serializer, which Flink's
    ``StringSerializer`` does (length 0) and the primitive ones refuse (``NullFieldException``
    in Flink; here an error naming the field).
    """
    def write(out: bytearray, value: Any) -> None:
        _check_fields(value, len(parts))
        for index, (part, field) in enumerate(zip(parts, value, strict=True)):
            try:
                part(out, field)
            except (InvalidArgumentError, TypeError, struct.error) as exc:
                if field is None:
                    raise InvalidArgumentError(
                        f"{value!r}: field f{index} of a Flink tuple is null, which its "
                        f"serializer cannot write") from exc
                raise
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
    class is the POJO's; null is flags ``IS_NULL`` (``1``) alone. (A POJO whose snapshot has
    subclasses: :func:`_pojo_with_subclasses`.)
    """
    layout = [(name, _null_flagged(part, 1)) for name, part in zip(fields, parts, strict=True)]
    names = frozenset(fields)
    listing = ", ".join(fields)

    def write(out: bytearray, value: Any) -> None:
        if _pojo_null(out, value, names, class_name, listing):
            return
        out.append(POJO_NO_SUBCLASS)
        for name, part in layout:
            part(out, value[name])
    return write


def _pojo_null(out: bytearray, value: Any, names: frozenset[str], class_name: str,
               listing: str) -> bool:
    """Whether a POJO value is null (then written: flags ``IS_NULL`` alone).

    A value that is not is a dict of exactly ``names`` (``listing`` lists them in the error).
    """
    if value is None:
        out.append(POJO_IS_NULL)
        return True
    if not isinstance(value, dict) or value.keys() != names:
        raise InvalidArgumentError(f"{value!r} is not a {class_name} POJO (fields {listing})")
    return False


def _pojo_with_subclasses(snapshot: SerializerSnapshot, plain: Encoder,
                          subclasses: list[Any]) -> Encoder:
    """``PojoSerializer`` of a POJO with subclasses: the value's ``@class`` picks the form.

    The POJO's class: ``plain`` (flags ``2``). A registered subclass: flags ``8``
    (``IS_TAGGED_SUBCLASS``), its tag byte, then the subclass's ``PojoSerializer`` bytes; another
    subclass of the snapshot: flags ``4`` (``IS_SUBCLASS``), its name (``writeUTF``), then the
    subclass's bytes. Fields the value's class has not must be ``None``.
    """
    class_name = snapshot.outer["class"]
    base_fields = snapshot.outer["fields"]
    base_specs = [(n, c.spec) for n, c in zip(
        base_fields, (codec_for(s) for s in snapshot.nested), strict=True) if c is not None]
    union, excluded = pojo_subclass_union(base_specs, [sub for sub, _ in subclasses])
    union_names = frozenset(name for name, _ in union)
    # per class: its fields, its flags and what follows them, and the plain encoder of it
    forms: dict[str, tuple[tuple[str, ...], bytes, Encoder]] = {
        class_name: (tuple(base_fields), b"", plain)}
    tag = 0
    for sub, _codec in subclasses:
        head = (bytes((POJO_IS_TAGGED_SUBCLASS, tag)) if sub.registered
                else bytes((POJO_IS_SUBCLASS,)) + _utf(sub.class_name))
        tag += sub.registered
        if sub.fields is None or sub.class_name in excluded:
            continue
        sub_snapshot = _subclass_snapshot(snapshot, sub.class_name, sub.registered)
        parts = [_encoder(n) for n in sub_snapshot.nested]
        if any(p is None for p in parts):
            continue
        names = tuple(sub_snapshot.outer["fields"])
        forms[sub.class_name] = (names, head, _pojo(sub.class_name, names,
                                                    [p for p in parts if p is not None]))

    listing = ", ".join(n for n, _ in union)

    def write(out: bytearray, value: Any) -> None:
        if _pojo_null(out, value, union_names, class_name, listing):
            return
        form = forms.get(value[CLASS_FIELD])
        if form is None:
            why = excluded.get(value[CLASS_FIELD], "not a class of the POJO's snapshot")
            raise InvalidArgumentError(f"a {class_name} POJO of class {value[CLASS_FIELD]!r} "
                                       f"cannot be written: {why}")
        names, head, encode = form
        own = {name: value[name] for name in names}
        if any(v is not None for k, v in value.items() if k not in own and k != CLASS_FIELD):
            raise InvalidArgumentError(f"{value!r}: a {value[CLASS_FIELD]} has no fields but "
                                       f"{', '.join(names)}")
        out += head
        encode(out, own)
    return write


def _subclass_snapshot(snapshot: SerializerSnapshot, name: str, registered: bool
                       ) -> SerializerSnapshot:
    names = snapshot.outer["registered_subclasses" if registered else "subclasses"]
    snapshots = snapshot.outer["registered_snapshots" if registered else "subclass_snapshots"]
    found: SerializerSnapshot = snapshots[list(names).index(name)]
    return found


def _utf(text: str) -> bytes:
    """``DataOutput.writeUTF`` of a class name (modified UTF-8, ``unsigned short`` length)."""
    data = text.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")
    return _U16.pack(len(data)) + data


def _nullable(inner: Encoder, padding: int) -> Encoder:
    """``NullableSerializer``: ``true`` and ``padding`` zero bytes, or ``false`` and the value."""
    pad = bytes(1 + padding)
    pad = b"\x01" + pad[1:]

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            out += pad
        else:
            out.append(0)
            inner(out, value)
    return write


def _set(element: Encoder) -> Encoder:
    """``SetSerializer`` (Flink 2.x): ``int size``, per element a null flag and the element.

    A set's elements are distinct in Java: a list with repeated elements is refused.
    """
    return _flagged_elements(element, 1, "a set's list of elements")


def _case_class(parts: list[Encoder]) -> Encoder:
    """Scala's ``CaseClassSerializer``: the fields back to back, each by its serializer.

    A ``None`` field goes to its serializer (an ``Option``'s ``None``); one that cannot hold it
    refuses it, as Flink's ``NullFieldException``.
    """
    def write(out: bytearray, value: Any) -> None:
        _check_fields(value, len(parts))
        for part, field in zip(parts, value, strict=True):
            part(out, field)
    return write


def _option(inner: Encoder) -> Encoder:
    """Scala's ``OptionSerializer``: ``true`` and the value (``Some``), or ``false``."""
    return _null_flagged(inner, 0)


def _traversable(element: Encoder) -> Encoder:
    """Scala's ``TraversableSerializer``: ``int size``, per element a flag and the element.

    The flag is ``true`` when the element follows, ``false`` for null.
    """
    return _flagged_elements(element, 0, "a collection's list of elements")


def _either(left: Encoder, right: Encoder) -> Encoder:
    """``EitherSerializer`` (and Scala's): ``true`` and the left value, or ``false`` and the right.

    The value is ``{"left": ..., "right": ...}`` with exactly one side not ``None``.
    """
    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, dict) or value.keys() != {"left", "right"} or (
                (value["left"] is None) == (value["right"] is None)):
            raise InvalidArgumentError(f"{value!r} is not an Either (left or right, not both)")
        if value["left"] is not None:
            out.append(1)
            left(out, value["left"])
        else:
            out.append(0)
            right(out, value["right"])
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
        _check_fields(value, len(parts))
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
