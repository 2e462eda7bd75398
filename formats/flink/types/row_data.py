"""Flink SQL's ``RowDataSerializer``: the codec of its values, their encoder and hash code.

``RowDataSerializer`` (``flink-table-runtime``) writes ``int size`` then a ``BinaryRowData``
(:mod:`formats.flink.types.binary_data` reads and writes its fields). The field types come from
the serializer snapshot's Java-serialized ``LogicalType`` objects
(:mod:`formats.flink.types.logical_types`). A decoded row keeps its bytes: Flink's key-group
hash of a ``RowData`` key is ``BinaryRowData.hashCode`` over them, and the writer writes a row
it read back as those bytes (a code-generated projection may leave bytes a fresh
``BinaryRowWriter`` would not); a row built by hand is written as
``RowDataSerializer.toBinaryRow`` writes a ``GenericRowData``.

The empty row (the key of every SQL aggregate without ``GROUP BY``) has the ``json`` spec (no
``tuple<>`` spec exists): its value is ``[]``, an :class:`EmptyRowData` keeping its bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.types.binary_data import (
    BinaryFormatError,
    SqlField,
    read_row,
    row_header_bytes,
    sql_field,
    write_row,
)
from formats.flink.types.codec import Codec
from formats.flink.types.logical_types import SqlType, sql_type
from statecore.errors import InvalidArgumentError, StatectlError, UnsupportedFormatError
from statecore.hashing import to_int32

__all__ = ["EmptyRowData", "RowDataTuple", "binary_row_hash", "row_data_codec",
           "row_data_encoder", "row_fields", "row_kind"]

_INT = struct.Struct(">i")
#: ``RowKind.toByteValue()``: INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE.
ROW_KINDS = (0, 1, 2, 3)


class RowDataTuple(tuple):  # type: ignore[type-arg]
    """A decoded ``BinaryRowData``: its fields, and its bytes (which its hash code is of).

    ``kind`` is its ``RowKind`` byte (0 ``INSERT``, 1 ``UPDATE_BEFORE``, 2 ``UPDATE_AFTER``, 3
    ``DELETE``), the first byte of its header.
    """

    binary: bytes

    def __new__(cls, values: list[Any], binary: bytes) -> RowDataTuple:
        obj = super().__new__(cls, values)
        obj.binary = binary
        return obj

    @property
    def kind(self) -> int:
        return self.binary[0] if self.binary else 0


class EmptyRowData(list):  # type: ignore[type-arg]
    """The empty ``BinaryRowData`` (no fields): ``[]`` in the ``json`` spec, and its bytes.

    Hashable (a key, in a dict of keys): by its bytes. It holds no element, ever.
    """

    binary: bytes

    def __init__(self, binary: bytes) -> None:
        super().__init__()
        self.binary = binary

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self.binary)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EmptyRowData):
            return self.binary == other.binary
        return isinstance(other, list) and not other

    @property
    def kind(self) -> int:
        return self.binary[0] if self.binary else 0


def row_kind(value: Any) -> int:
    """The ``RowKind`` byte of a row value (``INSERT``, 0, when it carries none)."""
    kind = getattr(value, "kind", 0)
    if kind not in ROW_KINDS:
        raise InvalidArgumentError(f"row kind {kind!r} (0..3)")
    return int(kind)


def row_fields(types: tuple[Any, ...]) -> list[SqlField] | None:
    """The fields of a row of Java-serialized ``LogicalType``s.

    ``None`` when one of them is a type statectl does not decode.
    """
    try:
        parsed: list[SqlType] = [sql_type(t) for t in types]
    except UnsupportedFormatError:
        return None
    fields = [sql_field(t) for t in parsed]
    if any(f is None for f in fields):
        return None
    return [f for f in fields if f is not None]


def row_data_codec(types: tuple[Any, ...]) -> Codec | None:
    """``RowDataSerializer``: ``int size`` then a ``BinaryRowData`` of the snapshot's types."""
    fields = row_fields(types)
    if fields is None:
        return None
    arity = len(fields)
    fixed = row_header_bytes(arity) + 8 * arity
    seen: dict[bytes, Any] = {}  # rows repeat (a key in every state and map pair)

    def read(r: DataReader) -> Any:
        row = r.sized_bytes()
        known = seen.get(row)
        if known is not None:
            return known
        if len(row) < fixed:
            raise r.fail(f"a BinaryRowData of {len(row)} bytes, at least {fixed} expected")
        if row[0] not in ROW_KINDS:
            raise r.fail(f"a BinaryRowData of RowKind byte {row[0]} (0..3)")
        try:
            values = read_row(row, 0, len(row), fields)
        except (BinaryFormatError, struct.error, IndexError) as exc:
            raise r.fail(f"malformed BinaryRowData: {exc}") from exc
        decoded: Any = RowDataTuple(values, row) if arity else EmptyRowData(row)
        if len(seen) >= 4096:
            seen.clear()
        seen[row] = decoded
        return decoded

    spec = "tuple<" + ",".join(f.spec for f in fields) + ">" if arity else "json"
    name = "RowData<" + ",".join(f.type.describe() for f in fields) + ">"
    return Codec(read, spec, -1, name, binary_row_hash(fields))


def _binary_of(value: Any, fields: list[SqlField]) -> bytes:
    """A row value's ``BinaryRowData``: the bytes it was read from, else written anew."""
    binary = getattr(value, "binary", None)
    if isinstance(binary, bytes):
        return binary
    return write_row(value, fields, row_kind(value))


def row_data_encoder(types: tuple[Any, ...]) -> Callable[[bytearray, Any], None] | None:
    """``RowDataSerializer.serialize``: ``int size``, then the row's ``BinaryRowData``.

    A row statectl read is written as the bytes it was read from; another (a tuple, or ``[]`` for
    the empty row) as ``toBinaryRow`` writes a ``GenericRowData`` of those fields (its
    ``RowKind`` the value's ``kind``, else ``INSERT``).
    """
    fields = row_fields(types)
    if fields is None:
        return None

    def write(out: bytearray, value: Any) -> None:
        binary = _binary_of(value, fields)
        out += _INT.pack(len(binary))
        out += binary
    return write


_C1, _C2, _MASK = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF


def binary_row_hash(fields: list[SqlField]) -> Callable[[Any], int]:
    """``BinaryRowData.hashCode``: ``MurmurHashUtil.hashByWords`` (seed 42) over its bytes.

    Murmur3 x86_32 over little-endian 4-byte words, then ``fmix`` with the length. A row built
    by hand (a key typed on the command line) is hashed over the bytes ``toBinaryRow`` writes.
    """
    def java_hash(value: Any) -> int:
        try:
            data = _binary_of(value, fields)
        except StatectlError as exc:
            raise UnsupportedFormatError(f"a RowData key's hash needs its binary form: "
                                         f"{exc}") from exc
        return murmur_hash_by_words(data)
    return java_hash


def murmur_hash_by_words(data: bytes) -> int:
    """``MurmurHashUtil.hashByWords(segments, offset, size)`` with seed 42."""
    if len(data) % 4:
        raise UnsupportedFormatError("a BinaryRowData's size is not a multiple of 4")
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
