"""RocksDB's byte encodings: varints, fixed-width little-endian integers, length-prefixed slices.

Port of ``util/coding.h`` / ``util/coding_lean.h``. A varint stores 7 bits per byte, least
significant group first, the high bit of a byte set when more bytes follow (LevelDB/protobuf
"base 128"). ``varint32`` takes at most 5 bytes and ``varint64`` at most 10; a longer run of
continuation bytes, a value past 32 (resp. 64) bits, or a varint cut off by the end of its slice
raises :class:`~statecore.errors.CorruptCheckpointError` naming the file and the offset, so a
malicious length never makes a reader loop or allocate. Fixed-width integers are little-endian
(``EncodeFixed32`` / ``EncodeFixed64``). A "varsigned" int64 is a zigzag-coded varint64
(``zigzagToI64``: ``(n >> 1) ^ -(n & 1)``).
"""

from __future__ import annotations

import struct

from statecore.errors import CorruptCheckpointError

__all__ = [
    "U32",
    "U64",
    "Buffer",
    "corrupt",
    "get_length_prefixed",
    "get_varint32",
    "get_varint64",
    "get_varsigned64",
]

#: What every decoder here accepts: the caller's bytes, or a view of them.
Buffer = bytes | bytearray | memoryview

U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")


def corrupt(where: str, message: str) -> CorruptCheckpointError:
    """The one shape of every corruption message: ``<file>: <what>``."""
    return CorruptCheckpointError(f"{where}: {message}")


def get_varint32(data: Buffer, pos: int, limit: int, where: str) -> tuple[int, int]:
    """Decode a varint32 at ``data[pos:limit]``: ``(value, position after it)``.

    Port of ``GetVarint32Ptr``; at most 5 bytes, the value must fit 32 bits.
    """
    if pos < limit:
        byte = data[pos]
        if byte < 128:  # the common one-byte case
            return byte, pos + 1
    result = 0
    shift = 0
    while shift <= 28:
        if pos >= limit:
            raise corrupt(where, f"varint32 truncated at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 128:
            if result > 0xFFFFFFFF:
                raise corrupt(where, f"varint32 over 32 bits ending at byte {pos}")
            return result, pos
        shift += 7
    raise corrupt(where, f"varint32 longer than 5 bytes ending at byte {pos}")


def get_varint64(data: Buffer, pos: int, limit: int, where: str) -> tuple[int, int]:
    """Decode a varint64 at ``data[pos:limit]``: ``(value, position after it)``.

    Port of ``GetVarint64Ptr``; at most 10 bytes, the value must fit 64 bits.
    """
    result = 0
    shift = 0
    while shift <= 63:
        if pos >= limit:
            raise corrupt(where, f"varint64 truncated at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 128:
            if result > 0xFFFFFFFFFFFFFFFF:
                raise corrupt(where, f"varint64 over 64 bits ending at byte {pos}")
            return result, pos
        shift += 7
    raise corrupt(where, f"varint64 longer than 10 bytes ending at byte {pos}")


def get_varsigned64(data: Buffer, pos: int, limit: int, where: str) -> tuple[int, int]:
    """Decode a zigzag varint64 (``GetVarsignedint64``): ``(value, position after it)``."""
    n, pos = get_varint64(data, pos, limit, where)
    return (n >> 1) ^ -(n & 1), pos


def get_length_prefixed(data: Buffer, pos: int, limit: int, where: str) -> tuple[bytes, int]:
    """Decode ``GetLengthPrefixedSlice``: a varint32 length, then that many bytes."""
    length, pos = get_varint32(data, pos, limit, where)
    end = pos + length
    if end > limit:
        raise corrupt(where, f"length-prefixed slice of {length} bytes at byte {pos} runs past "
                             f"its end ({limit - pos} bytes left)")
    return bytes(data[pos:end]), end
