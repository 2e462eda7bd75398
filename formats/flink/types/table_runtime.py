"""The serializers of Flink's table runtime (Flink SQL) other than ``RowDataSerializer``.

Readers (:data:`TABLE_CODECS`) and writers (:data:`TABLE_ENCODERS`) of the values of
``org.apache.flink.table.runtime.typeutils`` and ``...table.runtime.operators`` serializers, by
the short class name of their snapshot (Flink 2.3; Flink 1.20 writes the same bytes and
snapshots, checked by ``tests/test_flink_sql_types.py``):

=================================  ============================================  ===============
serializer                         bytes                                         spec
=================================  ============================================  ===============
``TimestampDataSerializer(p)``     ``long`` millis; p > 3: and ``int`` nanos of  ``timestamp[..]``
                                   the millisecond                               (``ms`` p <= 3,
                                                                                 ``us`` <= 6)
``DecimalDataSerializer(p, s)``    p <= 18: ``long`` unscaled; else ``int``      ``decimal``
                                   length + ``toUnscaledBytes()``
``ArrayDataSerializer``            ``int`` size + ``BinaryArrayData``            ``list<T>``
``MapDataSerializer``              ``int`` size + ``BinaryMapData``              ``map<K,V>``
``RawValueDataSerializer``         ``int`` size + the inner serializer's bytes   the inner's
``LinkedListSerializer``           ``int`` count, a null mask (outer snapshot    ``list<T>``
                                   says), the non-null elements
``SortedMapSerializer``            ``int`` count, per entry key, ``boolean``     ``map<K,V>``
                                   null, value
``WindowKeySerializer``            ``long`` window, the key row                  ``tuple<int64,K>``
``CountWindow.Serializer``         ``long`` id                                   ``int64``
``SortedLongSerializer`` (2.x)     ``long`` with its sign bit flipped            ``int64``
``BinaryRowDataSerializer``        ``int`` size + the row (no types in its       ``bytes``
                                   snapshot: kept as bytes)
=================================  ============================================  ===============

(``StringDataSerializer``, the table runtime's ``TimeWindow``/``GlobalWindow`` serializers and
``ExternalSerializer`` are in :mod:`formats.flink.types.codecs`.) A binary array or map keeps the
bytes it was read from (:class:`BinaryList`, :class:`BinaryDict`), which the writer writes back;
one built by hand is written as ``toBinaryArray``/``toBinaryMap`` write a generic one.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.types.binary_data import (
    BinaryFormatError,
    SqlField,
    make_decimal,
    map_field,
    read_array,
    read_map,
    sql_field,
    timestamp_spec,
    unscaled_of,
    write_array,
    write_map,
)
from formats.flink.types.codec import Codec
from formats.flink.types.logical_types import SqlType, sql_type
from formats.flink.types.snapshots import SerializerSnapshot
from statecore.errors import InvalidArgumentError, UnsupportedFormatError
from statecore.values import Instant

__all__ = ["TABLE_CODECS", "TABLE_ENCODERS", "BinaryDict", "BinaryList"]

Encoder = Callable[[bytearray, Any], None]
CodecOf = Callable[[SerializerSnapshot], Codec | None]
EncoderOf = Callable[[SerializerSnapshot], Encoder | None]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64_I32 = struct.Struct(">qi")
_SIGN = -1 << 63
NANOS_PER_MILLI = 1_000_000
#: Longest unscaled ``DecimalData`` statectl reads (``DECIMAL(38)`` needs 16 bytes).
MAX_DECIMAL_BYTES = 16


class BinaryList(list):  # type: ignore[type-arg]
    """A decoded ``BinaryArrayData``: its elements, and the bytes it was read from."""

    binary: bytes

    def __init__(self, values: list[Any], binary: bytes) -> None:
        super().__init__(values)
        self.binary = binary


class BinaryDict(dict):  # type: ignore[type-arg]
    """A decoded ``BinaryMapData``: its entries, and the bytes it was read from."""

    binary: bytes

    def __init__(self, values: dict[Any, Any], binary: bytes) -> None:
        super().__init__(values)
        self.binary = binary


# -- TimestampDataSerializer, DecimalDataSerializer ---------------------------------------------


def _timestamp_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec:
    """``TimestampDataSerializer.deserialize``.

    Compact (precision <= 3): ``long`` millis; else ``long`` millis and ``int`` nanos of the
    millisecond.
    """
    if snapshot.outer["precision"] <= 3:
        def read(r: DataReader) -> Instant:
            return Instant(r.i64() * NANOS_PER_MILLI)
        return Codec(read, "timestamp[ms]", 8, "TimestampData")

    def read_wide(r: DataReader) -> Instant:
        millis, nanos = r.i64(), r.i32()
        if not 0 <= nanos < NANOS_PER_MILLI:
            raise r.fail(f"TimestampData with {nanos} nanoseconds of a millisecond")
        return Instant(millis * NANOS_PER_MILLI + nanos)
    return Codec(read_wide, timestamp_spec(snapshot.outer["precision"]), 12, "TimestampData")


def _timestamp_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder:
    compact = snapshot.outer["precision"] <= 3

    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, Instant):
            raise InvalidArgumentError(f"{value!r} is not a timestamp (an Instant)")
        millis, nanos = divmod(value.epoch_nanos, NANOS_PER_MILLI)
        if compact:
            if nanos:
                raise InvalidArgumentError(f"{value!r} has sub-millisecond digits a "
                                           f"TIMESTAMP(3) or less cannot hold")
            out += _I64.pack(millis)
        else:
            out += _I64_I32.pack(millis, nanos)
    return write


def _decimal_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec:
    """``DecimalDataSerializer.deserialize``.

    ``long`` unscaled (precision <= 18), else ``int`` length and ``BigInteger`` bytes
    (big-endian two's complement).
    """
    precision, scale = snapshot.outer["precision"], snapshot.outer["scale"]
    if precision <= 18:
        def read(r: DataReader) -> decimal.Decimal:
            return make_decimal(r.i64(), scale)
    else:
        def read(r: DataReader) -> decimal.Decimal:
            data = r.sized_bytes()
            if not 0 < len(data) <= MAX_DECIMAL_BYTES:
                raise r.fail(f"a DecimalData of {len(data)} bytes (1..{MAX_DECIMAL_BYTES})")
            return make_decimal(int.from_bytes(data, "big", signed=True), scale)
    return Codec(read, "decimal", -1, f"DecimalData({precision},{scale})")


def _decimal_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder:
    precision, scale = snapshot.outer["precision"], snapshot.outer["scale"]

    def write(out: bytearray, value: Any) -> None:
        unscaled = unscaled_of(value, precision, scale)
        if precision <= 18:
            out += _I64.pack(unscaled)
            return
        bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
        data = unscaled.to_bytes(bits // 8 + 1, "big", signed=True)
        out += _I32.pack(len(data))
        out += data
    return write


# -- ArrayDataSerializer, MapDataSerializer -----------------------------------------------------


def _element_of(snapshot: SerializerSnapshot) -> SqlField | None:
    try:
        return sql_field(sql_type(snapshot.java_objects[0]))
    except (UnsupportedFormatError, IndexError):
        return None


def _map_of(snapshot: SerializerSnapshot) -> tuple[SqlField, SqlField] | None:
    """The key and value fields of a ``MapDataSerializerSnapshot``.

    A MULTISET's are the element and its ``INT NOT NULL`` count, as Flink's snapshot says.
    """
    try:
        key, value = sql_type(snapshot.java_objects[0]), sql_type(snapshot.java_objects[1])
    except (UnsupportedFormatError, IndexError):
        return None
    return map_field(SqlType("MAP", True, children=(key, value)))


def _sized(r: DataReader, what: str) -> bytes:
    data = r.sized_bytes()
    if not data:
        raise r.fail(f"an empty {what}")
    return data


def _array_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``ArrayDataSerializer.deserialize``: ``int`` size, a ``BinaryArrayData``."""
    element = _element_of(snapshot)
    if element is None:
        return None

    def read(r: DataReader) -> BinaryList:
        data = _sized(r, "BinaryArrayData")
        try:
            return BinaryList(read_array(data, 0, len(data), element), data)
        except (BinaryFormatError, struct.error, IndexError) as exc:
            raise r.fail(f"malformed BinaryArrayData: {exc}") from exc
    return Codec(read, f"list<{element.spec}>", -1, f"ArrayData<{element.type.describe()}>")


def _array_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    element = _element_of(snapshot)
    if element is None:
        return None
    return _binary_writer(lambda value: write_array(value, element))


def _map_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``MapDataSerializer.deserialize``: ``int`` size, a ``BinaryMapData``."""
    fields = _map_of(snapshot)
    if fields is None:
        return None
    key, value = fields

    def read(r: DataReader) -> BinaryDict:
        data = _sized(r, "BinaryMapData")
        try:
            return BinaryDict(read_map(data, 0, len(data), key, value), data)
        except (BinaryFormatError, struct.error, IndexError) as exc:
            raise r.fail(f"malformed BinaryMapData: {exc}") from exc
    return Codec(read, f"map<{key.spec},{value.spec}>", -1,
                 f"MapData<{key.type.describe()},{value.type.describe()}>")


def _map_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    fields = _map_of(snapshot)
    if fields is None:
        return None
    key, value = fields
    return _binary_writer(lambda v: write_map(v, key, value))


def _binary_writer(fresh: Callable[[Any], bytes]) -> Encoder:
    """``int`` size, then the bytes a value was read from, else ``fresh(value)``."""
    def write(out: bytearray, value: Any) -> None:
        binary = getattr(value, "binary", None)
        data = binary if isinstance(binary, bytes) else fresh(value)
        out += _I32.pack(len(data))
        out += data
    return write


# -- RawValueDataSerializer, BinaryRowDataSerializer --------------------------------------------


def _raw_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``RawValueDataSerializer``: ``int`` size, the inner serializer's bytes of the value.

    Decoded with the inner serializer's codec (its snapshot is the nested one); kept as bytes
    where statectl has none.
    """
    inner = codec_of(snapshot.nested[0]) if len(snapshot.nested) == 1 else None
    if inner is None:
        return Codec(DataReader.sized_bytes, "bytes", -1, "RawValueData")
    read_inner = inner.read_delimited

    def read(r: DataReader) -> Any:
        data = r.sized_bytes()
        sub = DataReader(data, r.where)
        value = read_inner(sub)
        if not sub.at_end():
            raise r.fail(f"a RawValueData of {len(data)} bytes holds {sub.pos} of its value")
        return value
    return Codec(read, inner.spec, -1, f"RawValueData<{inner.name}>")


def _raw_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    inner = encoder_of(snapshot.nested[0]) if len(snapshot.nested) == 1 else None
    if inner is None:
        return _sized_bytes
    encode = inner

    def write(out: bytearray, value: Any) -> None:
        data = bytearray()
        encode(data, value)
        out += _I32.pack(len(data))
        out += data
    return write


def _sized_bytes(out: bytearray, value: Any) -> None:
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not bytes")
    out += _I32.pack(len(value))
    out += value


def _binary_row_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec:
    """``BinaryRowDataSerializer``: ``int`` size, a ``BinaryRowData``.

    Its snapshot holds only the arity, no field types: the row is kept as bytes.
    """
    return Codec(DataReader.sized_bytes, "bytes", -1,
                 f"BinaryRowData({snapshot.outer['arity']} fields)")


# -- LinkedListSerializer, SortedMapSerializer ---------------------------------------------------


def _null_mask(r: DataReader, count: int) -> list[bool]:
    """``MaskUtils.readIntoMask``: ``ceil(count / 8)`` bytes.

    Element i's bit is ``0x80 >> i % 8`` of byte ``i / 8`` (set: null).
    """
    data = r.raw((count + 7) // 8)
    return [bool(data[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def _linked_list_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``LinkedListSerializer``: ``int`` count, a null mask, the elements that are not null.

    The null mask is there when the outer snapshot says so.
    """
    element = codec_of(snapshot.nested[0]) if len(snapshot.nested) == 1 else None
    if element is None:
        return None
    read_element, masked = element.read, bool(snapshot.outer.get("null_mask", False))

    def read(r: DataReader) -> list[Any]:
        count = r.count("LinkedList elements")
        if not masked:
            return [read_element(r) for _ in range(count)]
        return [None if null else read_element(r) for null in _null_mask(r, count)]
    return Codec(read, f"list<{element.spec}>", -1, f"LinkedList<{element.name}>")


def _linked_list_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    element = encoder_of(snapshot.nested[0]) if len(snapshot.nested) == 1 else None
    if element is None:
        return None
    encode, masked = element, bool(snapshot.outer.get("null_mask", False))

    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, list | tuple):
            raise InvalidArgumentError(f"{value!r} is not a list")
        out += _I32.pack(len(value))
        if masked:
            mask = bytearray((len(value) + 7) // 8)
            for i, v in enumerate(value):
                if v is None:
                    mask[i >> 3] |= 0x80 >> (i & 7)
            out += mask
        for v in value:
            if v is not None:
                encode(out, v)
            elif not masked:
                raise InvalidArgumentError("a LinkedListSerializer without a null mask holds "
                                           "no null")
    return write


def _sorted_map_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``SortedMapSerializer`` (``AbstractMapSerializer``): a count, then the entries.

    ``int`` count, per entry the key, a ``boolean`` (true: the value is null), the value.
    Entries in the comparator's order, which a ``dict`` keeps.
    """
    key = codec_of(snapshot.nested[0]) if len(snapshot.nested) == 2 else None
    value = codec_of(snapshot.nested[1]) if len(snapshot.nested) == 2 else None
    if key is None or value is None:
        return None
    read_key, read_value = key.read, value.read

    def read(r: DataReader) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for _ in range(r.count("SortedMap entries", 2)):
            k = read_key(r)
            out[k] = None if r.boolean() else read_value(r)
        return out
    return Codec(read, f"map<{key.spec},{value.spec}>", -1, f"SortedMap<{key.name},{value.name}>")


def _sorted_map_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    key = encoder_of(snapshot.nested[0]) if len(snapshot.nested) == 2 else None
    value = encoder_of(snapshot.nested[1]) if len(snapshot.nested) == 2 else None
    if key is None or value is None:
        return None
    write_key, write_value = key, value

    def write(out: bytearray, entries: Any) -> None:
        if not isinstance(entries, dict):
            raise InvalidArgumentError(f"{entries!r} is not a map")
        out += _I32.pack(len(entries))
        for k, v in entries.items():
            write_key(out, k)
            if v is None:
                out.append(1)
            else:
                out.append(0)
                write_value(out, v)
    return write


# -- windows and keys ---------------------------------------------------------------------------


def _window_key_codec(snapshot: SerializerSnapshot, codec_of: CodecOf) -> Codec | None:
    """``WindowKeySerializer``: ``long`` window, then the key (a ``RowData``)."""
    key = codec_of(snapshot.nested[0]) if len(snapshot.nested) == 1 else None
    if key is None:
        return None
    read_key = key.read

    def read(r: DataReader) -> tuple[int, Any]:
        return r.i64(), read_key(r)
    return Codec(read, f"tuple<int64,{key.spec}>", -1, f"WindowKey<{key.name}>")


def _window_key_encoder(snapshot: SerializerSnapshot, encoder_of: EncoderOf) -> Encoder | None:
    key = encoder_of(snapshot.nested[0]) if len(snapshot.nested) == 1 else None
    if key is None:
        return None
    encode = key

    def write(out: bytearray, value: Any) -> None:
        if not isinstance(value, tuple | list) or len(value) != 2:
            raise InvalidArgumentError(f"{value!r} is not a (window, key) pair")
        out += _I64.pack(value[0])
        encode(out, value[1])
    return write


def _sorted_long(r: DataReader) -> int:
    return int(r.i64() ^ _SIGN)  # MathUtils.flipSignBit


def _write_sorted_long(out: bytearray, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(f"{value!r} is not a long")
    out += _I64.pack(value ^ _SIGN)


def _write_long(out: bytearray, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(f"{value!r} is not a long")
    out += _I64.pack(value)


def _fixed_codec(codec: Codec) -> Callable[[SerializerSnapshot, CodecOf], Codec]:
    return lambda snapshot, codec_of: codec


def _fixed_encoder(encoder: Encoder) -> Callable[[SerializerSnapshot, EncoderOf], Encoder]:
    return lambda snapshot, encoder_of: encoder


#: Short snapshot class -> the codec of its serializer's values (``None``: not decodable).
TABLE_CODECS: dict[str, Callable[[SerializerSnapshot, CodecOf], Codec | None]] = {
    "TimestampDataSerializer$TimestampDataSerializerSnapshot": _timestamp_codec,
    "DecimalDataSerializer$DecimalSerializerSnapshot": _decimal_codec,
    "ArrayDataSerializer$ArrayDataSerializerSnapshot": _array_codec,
    "MapDataSerializer$MapDataSerializerSnapshot": _map_codec,
    "RawValueDataSerializer$RawValueDataSerializerSnapshot": _raw_codec,
    "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot": _binary_row_codec,
    "LinkedListSerializer$LinkedListSerializerSnapshot": _linked_list_codec,
    "SortedMapSerializerSnapshot": _sorted_map_codec,
    "WindowKeySerializer$WindowKeySerializerSnapshot": _window_key_codec,
    "CountWindow$Serializer$CountWindowSerializerSnapshot": _fixed_codec(
        Codec(DataReader.i64, "int64", 8, "CountWindow", struct_code="q")),
    "SortedLongSerializer$SortedLongSerializerSnapshot": _fixed_codec(
        Codec(_sorted_long, "int64", 8, "SortedLong")),
}

#: Short snapshot class -> the encoder of its serializer's values (the mirror of the above).
TABLE_ENCODERS: dict[str, Callable[[SerializerSnapshot, EncoderOf], Encoder | None]] = {
    "TimestampDataSerializer$TimestampDataSerializerSnapshot": _timestamp_encoder,
    "DecimalDataSerializer$DecimalSerializerSnapshot": _decimal_encoder,
    "ArrayDataSerializer$ArrayDataSerializerSnapshot": _array_encoder,
    "MapDataSerializer$MapDataSerializerSnapshot": _map_encoder,
    "RawValueDataSerializer$RawValueDataSerializerSnapshot": _raw_encoder,
    "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot": _fixed_encoder(_sized_bytes),
    "LinkedListSerializer$LinkedListSerializerSnapshot": _linked_list_encoder,
    "SortedMapSerializerSnapshot": _sorted_map_encoder,
    "WindowKeySerializer$WindowKeySerializerSnapshot": _window_key_encoder,
    "CountWindow$Serializer$CountWindowSerializerSnapshot": _fixed_encoder(_write_long),
    "SortedLongSerializer$SortedLongSerializerSnapshot": _fixed_encoder(_write_sorted_long),
}
