"""Flink SQL's ``BinaryRowData``: the codec of ``RowDataSerializer`` values, and their hash code.

``RowDataSerializer`` (``flink-table-runtime``) writes ``int size`` then the row's bytes: an
8-byte aligned header with the ``RowKind`` byte and a null bit per field, one 8-byte
little-endian slot per field, variable-length data after the slots (reference §6.4). The field
types come from the serializer snapshot's Java-serialized ``LogicalType`` objects
(:mod:`formats.flink.types.codecs` reads them); a row with a type not listed in
``_ROW_DATA_FIELDS`` gets no codec. A decoded row keeps its bytes: Flink's key-group hash of a
``RowData`` key is ``BinaryRowData.hashCode`` over them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from formats.flink.javaio import DataReader
from formats.flink.javaser import JavaEnum, JavaObject
from formats.flink.types.codec import Codec
from statecore.errors import UnsupportedFormatError
from statecore.hashing import to_int32

__all__ = ["RowDataTuple", "row_data_codec"]

_LONG = struct.Struct("<q")
_INT = struct.Struct("<i")
_SHORT = struct.Struct("<h")
_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")


def _type_root(logical: Any) -> tuple[str, bool]:
    """``(type root, nullable)`` of a parsed ``LogicalType`` object (or ``DataType``)."""
    if isinstance(logical, JavaObject) and "logicalType" in logical.fields:
        logical = logical.fields["logicalType"]
    if not isinstance(logical, JavaObject):
        return "UNKNOWN", True
    root = logical.fields.get("typeRoot")
    name = root.constant if isinstance(root, JavaEnum) else "UNKNOWN"
    return name, bool(logical.fields.get("isNullable", True))


#: BinaryRowData fixed-slot readers by LogicalTypeRoot: (spec, reader(row bytes, slot)).
def _slot_long(row: bytes, at: int) -> int:
    return int(_LONG.unpack_from(row, at)[0])


def _slot_var(row: bytes, at: int) -> bytes:
    word = int.from_bytes(row[at:at + 8], "little")
    if word >> 63:  # compact: up to 7 bytes in the slot itself, length in the top byte
        length = (word >> 56) & 0x7F
        return row[at:at + length]
    offset, length = word >> 32, word & 0xFFFFFFFF
    if offset + length > len(row):
        raise ValueError("variable-length field beyond the row")
    return row[offset:offset + length]


_ROW_DATA_FIELDS: dict[str, tuple[str, Callable[[bytes, int], Any]]] = {
    "BIGINT": ("int64", _slot_long),
    "INTEGER": ("int32", lambda row, at: int(_INT.unpack_from(row, at)[0])),
    "SMALLINT": ("int16", lambda row, at: int(_SHORT.unpack_from(row, at)[0])),
    "TINYINT": ("int8", lambda row, at: row[at] - 256 if row[at] > 127 else row[at]),
    "BOOLEAN": ("bool", lambda row, at: row[at] != 0),
    "DOUBLE": ("float64", lambda row, at: float(_DOUBLE.unpack_from(row, at)[0])),
    "FLOAT": ("float32", lambda row, at: float(_FLOAT.unpack_from(row, at)[0])),
    "DATE": ("int32", lambda row, at: int(_INT.unpack_from(row, at)[0])),
    "TIME_WITHOUT_TIME_ZONE": ("int32", lambda row, at: int(_INT.unpack_from(row, at)[0])),
    "VARCHAR": ("string", lambda row, at: _slot_var(row, at).decode("utf-8", "replace")),
    "CHAR": ("string", lambda row, at: _slot_var(row, at).decode("utf-8", "replace")),
    "VARBINARY": ("bytes", _slot_var),
    "BINARY": ("bytes", _slot_var),
    "RAW": ("bytes", _slot_var),
}


def row_data_codec(types: tuple[Any, ...]) -> Codec | None:
    """``RowDataSerializer``: ``int size`` then a ``BinaryRowData``.

    The row: an 8-byte aligned header with the RowKind byte and a null bit per field, one
    8-byte little-endian slot per field, variable-length data after the slots.
    """
    roots = [_type_root(t)[0] for t in types]
    if any(root not in _ROW_DATA_FIELDS for root in roots):
        return None
    fields = [_ROW_DATA_FIELDS[root] for root in roots]
    arity = len(fields)
    header = ((arity + 63 + 8) // 64) * 8
    fixed = header + 8 * arity

    # per field: its null bit (after the RowKind byte), its slot's offset, its slot reader
    layout = [(i + 8, header + 8 * i, slot) for i, (_spec, slot) in enumerate(fields)]

    seen: dict[bytes, RowDataTuple] = {}  # rows repeat (a key in every state and map pair)

    def read(r: DataReader) -> tuple[Any, ...]:
        row = r.sized_bytes()
        known = seen.get(row)
        if known is not None:
            return known
        if len(row) < fixed:
            raise r.fail(f"a BinaryRowData of {len(row)} bytes, at least {fixed} expected")
        bits = int.from_bytes(row[:header], "little")
        try:
            values = [None if bits >> bit & 1 else slot(row, at) for bit, at, slot in layout]
        except (ValueError, struct.error) as exc:
            raise r.fail(f"malformed BinaryRowData: {exc}") from exc
        decoded = RowDataTuple(values, row)
        if len(seen) >= 4096:
            seen.clear()
        seen[row] = decoded
        return decoded

    return Codec(read, "tuple<" + ",".join(spec for spec, _ in fields) + ">", -1,
                 "RowData<" + ",".join(roots) + ">", _binary_row_hash)


class RowDataTuple(tuple):  # type: ignore[type-arg]
    """A decoded ``BinaryRowData``: its fields, and its bytes (which its hash code is of)."""

    binary: bytes

    def __new__(cls, values: list[Any], binary: bytes) -> RowDataTuple:
        obj = super().__new__(cls, values)
        obj.binary = binary
        return obj


_C1, _C2, _MASK = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF


def _binary_row_hash(value: Any) -> int:
    """``BinaryRowData.hashCode``: ``MurmurHashUtil.hashByWords`` (seed 42) over its bytes.

    Murmur3 x86_32 over little-endian 4-byte words, then ``fmix`` with the length.
    """
    data = getattr(value, "binary", None)
    if data is None or len(data) % 4:
        raise UnsupportedFormatError("a RowData key's hash needs its binary form")
    h1 = 42
    for (word,) in struct.iter_unpack("<I", data):
        k1 = (word * _C1) & _MASK
        k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
        k1 = (k1 * _C2) & _MASK
        h1 ^= k1
        h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
        h1 = (h1 * 5 + 0xE6546B64) & _MASK
    h1 ^= len(data)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return to_int32(h1)
