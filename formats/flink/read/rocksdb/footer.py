"""The footer of a block-based table and its block handles (port of ``table/format.cc``).

A block handle is two varint64s, ``offset`` then ``size`` (``BlockHandle::EncodeTo``); the size
excludes the 5-byte block trailer (compression type byte + ``uint32LE`` checksum).

The footer is the last 53 bytes of the file (``Footer::kNewVersionsEncodedLength``) for every
format version this reader accepts (``2 <= format_version <= 6``):

* byte 0: the checksum type (``ChecksumType``);
* bytes 1..40, format versions 2..5: the metaindex handle and the index handle, then zero
  padding to 40 bytes (unchecked);
* bytes 1..40, format version 6: the extended magic ``3e 00 7a 00``, the footer checksum
  (``uint32LE``; the footer's checksum with these 4 bytes zeroed, plus the context modifier of
  the footer's offset), ``base_context_checksum`` (``uint32LE``, non-zero), the metaindex size
  (``uint32LE``; the metaindex ends right before the footer, trailer excluded), 16 unchecked
  bytes and 8 reserved bytes that must be zero. The index handle is then found in the
  metaindex under ``rocksdb.index``;
* bytes 41..44: ``format_version`` (``uint32LE``);
* bytes 45..52: the magic number, ``0x88e241b785f4cff7`` (``kBlockBasedTableMagicNumber``),
  little-endian.

Legacy block-based tables (magic ``0xdb4775248b80fb57``, format versions 0 and 1), plain and
cuckoo tables, format version 7 (compression manager names, RocksDB 10+) and unknown checksum
types raise :class:`~statecore.errors.UnsupportedFormatError`; anything else malformed raises
:class:`~statecore.errors.CorruptCheckpointError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from formats.flink.read.rocksdb.checksums import (
    ChecksumType,
    compute_builtin_checksum,
    context_modifier,
)
from formats.flink.read.rocksdb.coding import U32, U64, Buffer, corrupt, get_varint64
from statecore.errors import UnsupportedFormatError

__all__ = [
    "BLOCK_BASED_TABLE_MAGIC",
    "BLOCK_TRAILER_SIZE",
    "FOOTER_SIZE",
    "BlockHandle",
    "Footer",
    "decode_block_handle",
    "decode_footer",
    "has_block_based_magic",
]

BLOCK_BASED_TABLE_MAGIC = 0x88E241B785F4CFF7
LEGACY_BLOCK_BASED_TABLE_MAGIC = 0xDB4775248B80FB57
_OTHER_TABLE_MAGICS = {
    0x8242229663BF9564: "a plain table",
    0x4F3418EB7A8F13B8: "a legacy plain table",
    0x926789D0C5F17873: "a cuckoo table",
}
#: ``Footer::kNewVersionsEncodedLength``: 1 + 2 * 20 + 4 + 8.
FOOTER_SIZE = 53
#: ``BlockBasedTable::kBlockTrailerSize``: compression type + checksum.
BLOCK_TRAILER_SIZE = 5
SUPPORTED_FORMAT_VERSIONS = range(2, 7)
_EXTENDED_MAGIC = b"\x3e\x00\x7a\x00"


@dataclass(frozen=True, slots=True)
class BlockHandle:
    """Where a block lies in the file: ``offset`` and ``size`` in bytes, trailer excluded."""

    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Footer:
    """The decoded footer (``rocksdb::Footer``).

    ``index_handle`` is ``None`` for format version 6 (it is in the metaindex).
    ``base_context_checksum`` is 0 before format version 6.
    """

    format_version: int
    checksum_type: ChecksumType
    metaindex_handle: BlockHandle
    index_handle: BlockHandle | None
    base_context_checksum: int
    footer_offset: int


def has_block_based_magic(data: Buffer) -> bool:
    """Whether ``data`` ends with the block-based table magic number (cheap file sniffing)."""
    return len(data) >= 8 and U64.unpack_from(data, len(data) - 8)[0] == BLOCK_BASED_TABLE_MAGIC


def decode_block_handle(data: Buffer, pos: int, limit: int, where: str) -> tuple[BlockHandle, int]:
    """``BlockHandle::DecodeFrom``: a handle at ``data[pos:limit]`` and the position after it."""
    offset, pos = get_varint64(data, pos, limit, where)
    size, pos = get_varint64(data, pos, limit, where)
    return BlockHandle(offset, size), pos


def decode_footer(data: Buffer, where: str) -> Footer:
    """``Footer::DecodeFrom`` of the last :data:`FOOTER_SIZE` bytes of the whole file ``data``."""
    if len(data) < 8:
        raise corrupt(where, f"{len(data)} bytes is too short to be an SST file")
    magic = U64.unpack_from(data, len(data) - 8)[0]
    if magic == LEGACY_BLOCK_BASED_TABLE_MAGIC:
        raise UnsupportedFormatError(
            f"{where}: legacy block-based table (magic 0x{magic:016x}, format_version 0 or 1, "
            f"RocksDB < 4.6); only format_version 2..6 is supported")
    if magic in _OTHER_TABLE_MAGICS:
        raise UnsupportedFormatError(f"{where}: {_OTHER_TABLE_MAGICS[magic]}; only block-based "
                                     f"tables are supported")
    if magic != BLOCK_BASED_TABLE_MAGIC:
        raise corrupt(where, f"not an SST file: bad table magic number 0x{magic:016x}")
    if len(data) < FOOTER_SIZE:
        raise corrupt(where, f"{len(data)} bytes is too short to be an SST file")
    footer_offset = len(data) - FOOTER_SIZE
    footer = bytes(data[footer_offset:])
    format_version = U32.unpack_from(footer, FOOTER_SIZE - 12)[0]
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatError(
            f"{where}: block-based table format_version {format_version} is not supported "
            f"(2..6 are)")
    try:
        checksum_type = ChecksumType(footer[0])
    except ValueError:
        raise UnsupportedFormatError(f"{where}: unknown checksum type {footer[0]} in the "
                                     f"footer") from None
    if format_version >= 6:
        return _decode_footer_v6(footer, footer_offset, format_version, checksum_type, where)
    metaindex, pos = decode_block_handle(footer, 1, 41, where + " (footer)")
    index, _ = decode_block_handle(footer, pos, 41, where + " (footer)")
    return Footer(format_version, checksum_type, metaindex, index, 0, footer_offset)


def _decode_footer_v6(footer: bytes, footer_offset: int, format_version: int,
                      checksum_type: ChecksumType, where: str) -> Footer:
    if footer[1:5] != _EXTENDED_MAGIC:
        raise corrupt(where, f"bad extended magic number 0x{footer[1:5].hex()} in the footer")
    stored = U32.unpack_from(footer, 5)[0]
    base = U32.unpack_from(footer, 9)[0]
    metaindex_size = U32.unpack_from(footer, 13)[0]
    if context_modifier(base, 0) == 0:
        raise corrupt(where, "invalid base context checksum in the footer")
    if checksum_type != ChecksumType.NO_CHECKSUM:
        computed = compute_builtin_checksum(checksum_type, footer[:5] + bytes(4) + footer[9:])
        computed = (computed + context_modifier(base, footer_offset)) & 0xFFFFFFFF
        if computed != stored:
            raise corrupt(where, f"footer at {footer_offset} checksum mismatch")
    if U64.unpack_from(footer, 33)[0] != 0:
        raise UnsupportedFormatError(f"{where}: the footer uses a future feature (reserved bytes "
                                     f"set) not supported by format_version {format_version}")
    metaindex_end = footer_offset - BLOCK_TRAILER_SIZE
    if metaindex_size > metaindex_end:
        raise corrupt(where, f"metaindex size {metaindex_size} runs before the file's start")
    metaindex = BlockHandle(metaindex_end - metaindex_size, metaindex_size)
    return Footer(format_version, checksum_type, metaindex, None, base, footer_offset)
