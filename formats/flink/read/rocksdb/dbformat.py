"""Internal keys and value types of RocksDB (port of ``db/dbformat.h``).

Every key in a table is an *internal key*: the user key followed by 8 bytes, the little-endian
``uint64`` ``(sequence << 8) | value_type`` (``PackSequenceAndType``), with
``0 <= sequence <= 2**56 - 1`` (``kMaxSequenceNumber``). Internal keys sort by user key
(bytewise here), then by that packed number *descending*: newer versions first.

Value types found in table files (``enum ValueType``): ``kTypeDeletion = 0x0``,
``kTypeValue = 0x1``, ``kTypeMerge = 0x2``, ``kTypeSingleDeletion = 0x7`` and, only in the
range-deletion meta block, ``kTypeRangeDeletion = 0xF``. BlobDB references
(``kTypeBlobIndex = 0x11``), user-defined timestamps (``kTypeDeletionWithTimestamp = 0x14``),
wide columns (``kTypeWideColumnEntity = 0x16``) and ``kTypeValuePreferredSeqno = 0x18`` are
refused with :class:`~statecore.errors.UnsupportedFormatError`; any other byte (the WAL-only
types) is corruption.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "MAX_SEQUENCE_NUMBER",
    "SUPPORTED_VALUE_TYPES",
    "UNSUPPORTED_VALUE_TYPES",
    "ValueType",
    "pack_sequence_and_type",
]

#: ``kMaxSequenceNumber``: sequence numbers take 56 bits.
MAX_SEQUENCE_NUMBER = (1 << 56) - 1


class ValueType(IntEnum):
    """The value types that can appear in a table file (``rocksdb::ValueType``)."""

    DELETION = 0x0
    VALUE = 0x1
    MERGE = 0x2
    SINGLE_DELETION = 0x7
    RANGE_DELETION = 0xF


#: Types of point entries this reader understands.
SUPPORTED_VALUE_TYPES = frozenset(
    {ValueType.DELETION, ValueType.VALUE, ValueType.MERGE, ValueType.SINGLE_DELETION}
)

#: Valid RocksDB types of features this reader refuses, by the name RocksDB gives them.
UNSUPPORTED_VALUE_TYPES = {
    0x11: "kTypeBlobIndex (BlobDB)",
    0x14: "kTypeDeletionWithTimestamp (user-defined timestamps)",
    0x16: "kTypeWideColumnEntity (wide columns)",
    0x18: "kTypeValuePreferredSeqno (TimedPut)",
}


def pack_sequence_and_type(sequence: int, value_type: int) -> int:
    """``PackSequenceAndType``: the 8-byte trailer of an internal key, as an integer."""
    return (sequence << 8) | value_type
