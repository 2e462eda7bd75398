"""Flink SQL's binary formats: ``BinaryRowData``, ``BinaryArrayData``, ``BinaryMapData``.

Port of ``org.apache.flink.table.data.binary`` (``flink-table-common``: ``BinaryRowData``,
``BinaryArrayData``, ``BinaryMapData``, ``BinarySegmentUtils``) for reading, and of
``org.apache.flink.table.data.writer`` (``flink-table-runtime``: ``AbstractBinaryWriter``,
``BinaryRowWriter``, ``BinaryArrayWriter``, ``BinaryWriter.write``) for writing, Flink 2.3 (1.20
writes the same bytes). All numbers are little-endian (``MemorySegment``'s native order).

``BinaryRowData``::

    header: ceil((arity + 8) / 64) * 8 bytes -- byte 0 the RowKind, then a null bit per field
            (field i: bit i + 8, bit j of the header is bit j % 8 of byte j // 8)
    fixed:  one 8-byte slot per field
    variable part: what the slots point to, each piece padded to 8 bytes

``BinaryArrayData``: ``int numElements``, a null bit per element rounded up to 4-byte words,
the elements (1 byte for BOOLEAN/TINYINT, 2 SMALLINT, 4 INTEGER/FLOAT/DATE/TIME/INTERVAL_YEAR_MONTH,
8 for the rest), padded to 8 bytes, then the variable part. ``BinaryMapData``: ``int`` size of the
key array, the key array, the value array.

A slot (or an 8-byte element) holds a fixed-width value itself, or, for a variable-length
value, ``offset << 32 | size`` (offset from the row's or array's first byte). Strings and byte
strings of at most 7 bytes are kept in the slot: top bit set, length in the top byte's low 7 bits,
the bytes from the slot's first byte. ``DECIMAL`` of precision <= 18 is its unscaled ``long``, a
larger one ``toUnscaledBytes()`` (big-endian two's complement) in a 16-byte piece;
``TIMESTAMP``/``TIMESTAMP_LTZ`` of precision <= 3 are epoch milliseconds, a larger one a ``long``
of milliseconds in the variable part with the slot ``offset << 32 | nanoOfMillisecond``.

Python values: BOOLEAN ``bool``; TINYINT..BIGINT, DATE (days), TIME (milliseconds of the day),
intervals (months; milliseconds) ``int``; FLOAT/DOUBLE ``float``; CHAR/VARCHAR ``str``;
BINARY/VARBINARY, RAW (its serializer's bytes), VARIANT and BITMAP (their binary form) ``bytes``;
DECIMAL ``decimal.Decimal`` of the type's scale; timestamps
:class:`~statecore.values.Instant`; ARRAY ``list``; MAP ``dict``; MULTISET ``dict`` of element to
count; ROW and structured types ``tuple``; NULL ``None``.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from formats.flink.types.logical_types import SqlType
from statecore.errors import InvalidArgumentError, UnsupportedFormatError
from statecore.values import Instant

__all__ = ["BinaryFormatError", "SqlField", "array_field", "map_field", "read_array",
           "read_row", "row_header_bytes", "sql_field", "timestamp_spec", "write_array",
           "write_map", "write_row"]

_B = struct.Struct("<b")
_H = struct.Struct("<h")
_I = struct.Struct("<i")
_Q = struct.Struct("<q")
_UQ = struct.Struct("<Q")
_F = struct.Struct("<f")
_D = struct.Struct("<d")

#: ``BinaryFormat.MAX_FIX_PART_DATA_SIZE``: bytes a slot holds itself.
MAX_FIX_PART_DATA_SIZE = 7
#: ``DecimalData.MAX_COMPACT_PRECISION`` and ``TimestampData.isCompact``'s bound.
MAX_COMPACT_DECIMAL = 18
MAX_COMPACT_TIMESTAMP = 3
NANOS_PER_MILLI = 1_000_000
_HIGHEST_BIT = 1 << 63


class BinaryFormatError(ValueError):
    """A binary row, array or map whose bytes do not hold together (the caller names it)."""


def row_header_bytes(arity: int) -> int:
    """``BinaryRowData.calculateBitSetWidthInBytes``: ``((arity + 63 + 8) / 64) * 8``."""
    return ((arity + 63 + 8) // 64) * 8


def _array_header_bytes(count: int) -> int:
    """``BinaryArrayData.calculateHeaderInBytes``: ``4 + ((count + 31) / 32) * 4``."""
    return 4 + ((count + 31) // 32) * 4


def _round8(size: int) -> int:
    return (size + 7) & ~7


def _var(buf: bytes, base: int, end: int, word: int) -> tuple[int, int]:
    """``offset << 32 | size`` of a slot: the absolute start and end of its piece."""
    offset, size = word >> 32, word & 0xFFFFFFFF
    start = base + offset
    if offset & 0x80000000 or start + size > end:
        raise BinaryFormatError(f"a variable-length field at {offset} of {size} bytes is beyond "
                                f"its {end - base}-byte container")
    return start, start + size


def _var_bytes(buf: bytes, base: int, end: int, at: int) -> bytes:
    """``BinarySegmentUtils.readBinary``: in the slot (top bit set) or in the variable part."""
    word = _UQ.unpack_from(buf, at)[0]
    if word & _HIGHEST_BIT:
        length = (word >> 56) & 0x7F
        if length > MAX_FIX_PART_DATA_SIZE:
            raise BinaryFormatError(f"{length} bytes in an 8-byte slot")
        return bytes(buf[at:at + length])
    start, stop = _var(buf, base, end, word)
    return bytes(buf[start:stop])


def make_decimal(unscaled: int, scale: int) -> decimal.Decimal:
    """The ``BigDecimal`` of an unscaled value and a scale, exactly (no context rounding)."""
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return decimal.Decimal((1 if unscaled < 0 else 0, digits, -scale))


def unscaled_of(value: Any, precision: int, scale: int) -> int:
    """The unscaled value of a decimal at ``scale``.

    Refused when it would round or overflow ``precision`` digits (``DecimalData.fromBigDecimal``
    gives null there).
    """
    if not isinstance(value, decimal.Decimal | int) or isinstance(value, bool):
        raise InvalidArgumentError(f"{value!r} is not a decimal")
    exact = decimal.Decimal(value)
    if not exact.is_finite():
        raise InvalidArgumentError(f"{value!r} is not a finite decimal")
    unscaled = exact.scaleb(scale, decimal.Context(prec=100))
    if unscaled != unscaled.to_integral_value():
        raise InvalidArgumentError(f"{value!r} has more than {scale} decimal places")
    result = int(unscaled)
    if len(str(abs(result))) > precision:
        raise InvalidArgumentError(f"{value!r} has more than {precision} digits")
    return result


@dataclass(frozen=True)
class SqlField:
    """How one ``LogicalType``'s values sit in a slot or array element.

    ``size``: the element size in a ``BinaryArrayData`` (a row's slot is 8 bytes);
    ``read(buf, base, end, at)``: the value whose slot starts at ``at`` in a container spanning
    ``base..end``; ``write(writer, at, value)``: the inverse (:class:`_Writer`); ``spec``: the
    statectl type spec of the values; ``None`` for a type statectl does not decode.
    """

    type: SqlType
    size: int
    spec: str
    read: Callable[[bytes, int, int, int], Any]
    write: Callable[[_Writer, int, Any], None]


class _Writer:
    """``AbstractBinaryWriter``: a buffer with a fixed part and a cursor into the variable part."""

    def __init__(self, fixed: int) -> None:
        self.buf = bytearray(fixed)
        self.cursor = fixed

    def put(self, at: int, packer: struct.Struct, value: Any) -> None:
        packer.pack_into(self.buf, at, value)

    def var_part(self, at: int, data: bytes) -> None:
        """``writeBytesToVarLenPart``/``writeSegmentsToVarLenPart``: padded to 8 bytes."""
        start = self.cursor
        self.buf += data
        self.buf += bytes(_round8(len(data)) - len(data))
        _UQ.pack_into(self.buf, at, start << 32 | len(data))
        self.cursor = len(self.buf)

    def bytes_field(self, at: int, data: bytes) -> None:
        """``writeBinary``/``writeString``: at most 7 bytes in the slot, else the variable part."""
        if len(data) <= MAX_FIX_PART_DATA_SIZE:
            word = (len(data) | 0x80) << 56 | int.from_bytes(data, "little")
            _UQ.pack_into(self.buf, at, word)
        else:
            self.var_part(at, data)


def _fixed(packer: struct.Struct, spec: str, check: Callable[[Any], bool], what: str
           ) -> tuple[str, Callable[[bytes, int, int, int], Any],
                      Callable[[_Writer, int, Any], None], int]:
    unpack_from, size = packer.unpack_from, packer.size

    def read(buf: bytes, base: int, end: int, at: int) -> Any:
        return unpack_from(buf, at)[0]

    def write(w: _Writer, at: int, value: Any) -> None:
        if not check(value):
            raise InvalidArgumentError(f"{value!r} is not {what}")
        try:
            packer.pack_into(w.buf, at, value)
        except struct.error as exc:
            raise InvalidArgumentError(f"{value!r} is not {what}: {exc}") from exc
    return spec, read, write, size


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_float(value: Any) -> bool:
    return isinstance(value, float | int) and not isinstance(value, bool)


_FIXED = {
    "BOOLEAN": _fixed(struct.Struct("<?"), "bool", lambda v: isinstance(v, bool), "a boolean"),
    "TINYINT": _fixed(_B, "int8", _is_int, "a TINYINT"),
    "SMALLINT": _fixed(_H, "int16", _is_int, "a SMALLINT"),
    "INTEGER": _fixed(_I, "int32", _is_int, "an INTEGER"),
    "DATE": _fixed(_I, "int32", _is_int, "a DATE (days since 1970-01-01)"),
    "TIME_WITHOUT_TIME_ZONE": _fixed(_I, "int32", _is_int, "a TIME (milliseconds of the day)"),
    "INTERVAL_YEAR_MONTH": _fixed(_I, "int32", _is_int, "an INTERVAL YEAR TO MONTH (months)"),
    "BIGINT": _fixed(_Q, "int64", _is_int, "a BIGINT"),
    "INTERVAL_DAY_TIME": _fixed(_Q, "int64", _is_int, "an INTERVAL DAY TO SECOND (millis)"),
    "FLOAT": _fixed(_F, "float32", _is_float, "a FLOAT"),
    "DOUBLE": _fixed(_D, "float64", _is_float, "a DOUBLE"),
}


def _string_read(buf: bytes, base: int, end: int, at: int) -> str:
    return _var_bytes(buf, base, end, at).decode("utf-8", "replace")


def _string_write(w: _Writer, at: int, value: Any) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{value!r} is not a string")
    w.bytes_field(at, value.encode("utf-8", "replace"))


def _binary_write(w: _Writer, at: int, value: Any) -> None:
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not bytes")
    w.bytes_field(at, bytes(value))


def _var_part_read(buf: bytes, base: int, end: int, at: int) -> bytes:
    start, stop = _var(buf, base, end, _UQ.unpack_from(buf, at)[0])
    return bytes(buf[start:stop])


def _var_part_write(w: _Writer, at: int, value: Any) -> None:
    """``writeRawValue``/``writeVariant``/``writeBitmap``: the bytes in the variable part."""
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not bytes")
    w.var_part(at, bytes(value))


def _decimal(t: SqlType) -> SqlField:
    precision, scale = t.precision, t.scale
    if precision <= MAX_COMPACT_DECIMAL:
        def read(buf: bytes, base: int, end: int, at: int) -> decimal.Decimal:
            return make_decimal(_Q.unpack_from(buf, at)[0], scale)

        def write(w: _Writer, at: int, value: Any) -> None:
            _Q.pack_into(w.buf, at, unscaled_of(value, precision, scale))
    else:
        def read(buf: bytes, base: int, end: int, at: int) -> decimal.Decimal:
            start, stop = _var(buf, base, end, _UQ.unpack_from(buf, at)[0])
            if stop - start > 16:
                raise BinaryFormatError(f"a DECIMAL of {stop - start} bytes (16 at most)")
            unscaled = int.from_bytes(buf[start:stop], "big", signed=True)
            return make_decimal(unscaled, scale)

        def write(w: _Writer, at: int, value: Any) -> None:
            unscaled = unscaled_of(value, precision, scale)
            data = _unscaled_bytes(unscaled)
            start = w.cursor  # 16 bytes reserved, zeroed; the bytes at their start
            w.buf += data + bytes(16 - len(data))
            _UQ.pack_into(w.buf, at, start << 32 | len(data))
            w.cursor = len(w.buf)
    return SqlField(t, 8, "decimal", read, write)


def _unscaled_bytes(unscaled: int) -> bytes:
    """``BigInteger.toByteArray``: the minimal big-endian two's complement."""
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def _timestamp_parts(value: Any, compact: bool) -> tuple[int, int]:
    if not isinstance(value, Instant):
        raise InvalidArgumentError(f"{value!r} is not a timestamp (an Instant)")
    millis, nanos = divmod(value.epoch_nanos, NANOS_PER_MILLI)
    if compact and nanos:
        raise InvalidArgumentError(f"{value!r} has sub-millisecond digits a TIMESTAMP(3) or less "
                                   f"cannot hold")
    return millis, nanos


def _timestamp(t: SqlType) -> SqlField:
    if t.precision <= MAX_COMPACT_TIMESTAMP:
        def read(buf: bytes, base: int, end: int, at: int) -> Instant:
            return Instant(_Q.unpack_from(buf, at)[0] * NANOS_PER_MILLI)

        def write(w: _Writer, at: int, value: Any) -> None:
            _Q.pack_into(w.buf, at, _timestamp_parts(value, True)[0])
        return SqlField(t, 8, "timestamp[ms]", read, write)

    def read_wide(buf: bytes, base: int, end: int, at: int) -> Instant:
        word = _UQ.unpack_from(buf, at)[0]
        offset, nanos = word >> 32, word & 0xFFFFFFFF
        start = base + offset
        if offset & 0x80000000 or start + 8 > end or nanos >= NANOS_PER_MILLI:
            raise BinaryFormatError(f"a TIMESTAMP slot {word:#x} points outside its container "
                                    f"or holds {nanos} nanoseconds of a millisecond")
        return Instant(_Q.unpack_from(buf, start)[0] * NANOS_PER_MILLI + nanos)

    def write_wide(w: _Writer, at: int, value: Any) -> None:
        millis, nanos = _timestamp_parts(value, False)
        start = w.cursor
        w.buf += _Q.pack(millis)
        _UQ.pack_into(w.buf, at, start << 32 | nanos)
        w.cursor = len(w.buf)
    return SqlField(t, 8, timestamp_spec(t.precision), read_wide, write_wide)


def timestamp_spec(precision: int) -> str:
    """The spec of a ``TIMESTAMP(precision)``'s values (:class:`~statecore.values.Instant`).

    Milliseconds up to 3 digits, microseconds up to 6 (years 1..9999 fit its Arrow column),
    nanoseconds up to 9 (years 1677..2262 in Arrow).
    """
    return ("timestamp[ms]" if precision <= MAX_COMPACT_TIMESTAMP else
            "timestamp[us]" if precision <= 6 else "timestamp[ns]")


def _nested(t: SqlType, reader: Callable[[bytes, int, int], Any],
            writer: Callable[[Any], bytes], spec: str) -> SqlField:
    """A value in the variable part that is itself a binary row, array or map."""
    def read(buf: bytes, base: int, end: int, at: int) -> Any:
        start, stop = _var(buf, base, end, _UQ.unpack_from(buf, at)[0])
        return reader(buf, start, stop)

    def write(w: _Writer, at: int, value: Any) -> None:
        w.var_part(at, writer(value))
    return SqlField(t, 8, spec, read, write)


def _no_write(what: str) -> Callable[[_Writer, int, Any], None]:
    def write(w: _Writer, at: int, value: Any) -> None:
        raise InvalidArgumentError(f"a {what} value cannot be written (it is always null)")
    return write


def sql_field(t: SqlType) -> SqlField | None:
    """The :class:`SqlField` of a type, or ``None`` where statectl does not decode it.

    Not decoded: ``TIMESTAMP WITH TIME ZONE`` (Flink's runtime has no binary form of it),
    ``SYMBOL``, ``UNRESOLVED``, ``DESCRIPTOR``, and what holds one of them.
    """
    root = t.root
    if root in _FIXED:
        spec, read, write, size = _FIXED[root]
        return SqlField(t, size, spec, read, write)
    if root in ("CHAR", "VARCHAR"):
        return SqlField(t, 8, "string", _string_read, _string_write)
    if root in ("BINARY", "VARBINARY"):
        return SqlField(t, 8, "bytes", _var_bytes, _binary_write)
    if root in ("RAW", "VARIANT", "BITMAP"):
        return SqlField(t, 8, "bytes", _var_part_read, _var_part_write)
    if root == "DECIMAL":
        return _decimal(t)
    if root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
        return _timestamp(t)
    if root == "NULL":
        return SqlField(t, 8, "json", lambda buf, base, end, at: None, _no_write("NULL"))
    if root == "ARRAY":
        element = sql_field(t.children[0])
        if element is None:
            return None
        return _nested(t, lambda buf, s, e: read_array(buf, s, e, element),
                       lambda v: write_array(v, element), f"list<{element.spec}>")
    if root in ("MAP", "MULTISET"):
        fields = map_field(t)
        if fields is None:
            return None
        key, value = fields
        return _nested(t, lambda buf, s, e: read_map(buf, s, e, key, value),
                       lambda v: write_map(v, key, value), f"map<{key.spec},{value.spec}>")
    if root in ("ROW", "STRUCTURED_TYPE"):
        parts = [sql_field(c) for c in t.children]
        if any(p is None for p in parts) or not parts:
            return None
        known = [p for p in parts if p is not None]
        return _nested(t, lambda buf, s, e: tuple(read_row(buf, s, e, known)),
                       lambda v: write_row(v, known), "tuple<" + ",".join(p.spec for p in known)
                       + ">")
    return None


def array_field(t: SqlType) -> SqlField | None:
    """The element field of an ``ArrayDataSerializer`` of element type ``t``."""
    return sql_field(t)


#: Parts of a spec whose values cannot be dict keys in Python (a list, a map): MAP keys of
#: such a type are not decoded.
_UNHASHABLE = ("list<", "map<", "json")


def map_field(t: SqlType) -> tuple[SqlField, SqlField] | None:
    """The key and value fields of a ``MAP`` (a ``MULTISET``: the element and ``INT NOT NULL``)."""
    if t.root == "MULTISET":
        key = sql_field(t.children[0])
        value: SqlField | None = sql_field(SqlType("INTEGER", False))
    else:
        key, value = sql_field(t.children[0]), sql_field(t.children[1])
    if key is None or value is None or any(u in key.spec for u in _UNHASHABLE):
        return None
    return key, value


# -- reading -----------------------------------------------------------------------------------


def read_row(buf: bytes, start: int, end: int, fields: list[SqlField]) -> list[Any]:
    """The fields of the ``BinaryRowData`` at ``buf[start:end]`` (``None`` for null)."""
    arity = len(fields)
    header = row_header_bytes(arity)
    if end - start < header + 8 * arity:
        raise BinaryFormatError(f"a BinaryRowData of {end - start} bytes, at least "
                                f"{header + 8 * arity} expected for {arity} fields")
    bits = int.from_bytes(buf[start:start + header], "little")
    values: list[Any] = []
    at = start + header
    for i, f in enumerate(fields):
        values.append(None if bits >> (i + 8) & 1 else f.read(buf, start, end, at))
        at += 8
    return values


def read_array(buf: bytes, start: int, end: int, element: SqlField) -> list[Any]:
    """The elements of the ``BinaryArrayData`` at ``buf[start:end]``."""
    if end - start < 4:
        raise BinaryFormatError("a BinaryArrayData of less than 4 bytes")
    count = _I.unpack_from(buf, start)[0]
    header = _array_header_bytes(count) if count >= 0 else 0
    if count < 0 or header + count * element.size > end - start:
        raise BinaryFormatError(f"a BinaryArrayData of {count} elements in {end - start} bytes")
    bits = int.from_bytes(buf[start + 4:start + header], "little")
    size, read = element.size, element.read
    at = start + header
    values: list[Any] = []
    for i in range(count):
        values.append(None if bits >> i & 1 else read(buf, start, end, at))
        at += size
    return values


def read_map(buf: bytes, start: int, end: int, key: SqlField, value: SqlField) -> dict[Any, Any]:
    """``BinaryMapData``: ``int`` key array size, the key array, the value array."""
    if end - start < 4:
        raise BinaryFormatError("a BinaryMapData of less than 4 bytes")
    keys_size = _I.unpack_from(buf, start)[0]
    if keys_size < 0 or 4 + keys_size > end - start:
        raise BinaryFormatError(f"a BinaryMapData's key array of {keys_size} bytes in "
                                f"{end - start}")
    keys = read_array(buf, start + 4, start + 4 + keys_size, key)
    values = read_array(buf, start + 4 + keys_size, end, value)
    if len(keys) != len(values):
        raise BinaryFormatError(f"a BinaryMapData of {len(keys)} keys and {len(values)} values")
    try:
        out = dict(zip(keys, values, strict=True))
    except TypeError as exc:
        raise UnsupportedFormatError(f"a MAP key statectl cannot hold: {exc}") from exc
    if len(out) != len(keys):
        raise BinaryFormatError("a BinaryMapData holds one key twice")
    return out


# -- writing -----------------------------------------------------------------------------------


def write_row(values: Any, fields: list[SqlField], kind: int = 0) -> bytes:
    """``RowDataSerializer.toBinaryRow`` of a row of ``values``.

    ``writeRowKind``, then per field ``setNullAt`` (null bit, slot zeroed) or
    ``BinaryWriter.write``.
    """
    if not isinstance(values, tuple | list) or len(values) != len(fields):
        raise InvalidArgumentError(f"{values!r} is not a row of {len(fields)} fields")
    if kind not in (0, 1, 2, 3):
        raise InvalidArgumentError(f"row kind {kind!r} (0..3)")
    header = row_header_bytes(len(fields))
    w = _Writer(header + 8 * len(fields))
    w.buf[0] = kind
    for i, (f, v) in enumerate(zip(fields, values, strict=True)):
        if v is None:
            w.buf[(i + 8) >> 3] |= 1 << ((i + 8) & 7)
        else:
            f.write(w, header + 8 * i, v)
    return bytes(w.buf)


def write_array(values: Any, element: SqlField) -> bytes:
    """``ArrayDataSerializer.toBinaryArray`` of a list.

    ``BinaryArrayWriter``: ``setNullAt(i, type)`` (null bit, element zeroed) for a null,
    ``BinaryWriter.write`` else.
    """
    if not isinstance(values, list | tuple):
        raise InvalidArgumentError(f"{values!r} is not an array (a list)")
    count = len(values)
    header = _array_header_bytes(count)
    w = _Writer(_round8(header + element.size * count))
    _I.pack_into(w.buf, 0, count)
    float_nan = element.type.root in ("FLOAT", "DOUBLE")
    for i, v in enumerate(values):
        if v is None:
            w.buf[4 + (i >> 3)] |= 1 << (i & 7)
        else:
            if float_nan and v != v:  # BinaryArrayWriter writes Float.NaN / Double.NaN
                v = float("nan")
            element.write(w, header + element.size * i, v)
    return bytes(w.buf)


def write_map(values: Any, key: SqlField, value: SqlField) -> bytes:
    """``MapDataSerializer.toBinaryMap`` of a dict.

    The keys and the values as two arrays, in the map's order, then ``BinaryMapData.valueOf``:
    the key array's size, the key array, the value array.
    """
    if not isinstance(values, dict):
        raise InvalidArgumentError(f"{values!r} is not a map (a dict)")
    keys = write_array(list(values.keys()), key)
    items = write_array(list(values.values()), value)
    return _I.pack(len(keys)) + keys + items

