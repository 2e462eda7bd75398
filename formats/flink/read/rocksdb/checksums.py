"""Block checksums of block-based tables: CRC32C (masked), xxHash32, xxHash64 and XXH3.

Port of ``ComputeBuiltinChecksum`` / ``ComputeBuiltinChecksumWithLastByte`` (``table/format.cc``),
``crc32c::Mask`` (``util/crc32c.h``) and ``ChecksumModifierForContext`` (``table/format.h``).

Every block is followed by a 5-byte trailer: its compression type (1 byte) and a ``uint32LE``
checksum of the block *and* that type byte, of the type named in the footer
(``ChecksumType``: 0 none, 1 ``kCRC32c``, 2 ``kxxHash``, 3 ``kxxHash64``, 4 ``kXXH3``):

* ``kCRC32c``: CRC-32C (Castagnoli) of the bytes, masked: ``rotr32(crc, 15) + 0xa282ead8``.
* ``kxxHash``: XXH32 with seed 0.
* ``kxxHash64``: the low 32 bits of XXH64 with seed 0.
* ``kXXH3``: the low 32 bits of XXH3-64 of all bytes *but the last*, xor'ed with
  ``last_byte * 0x6b9083d9`` (mod 2^32); 0 for empty input.

Format version 6 adds a *context* to every stored checksum so that a block copied to another
offset or file fails: ``stored = checksum + modifier (mod 2^32)`` with
``modifier = base_context_checksum ^ (lo32(offset) + hi32(offset))`` (0 when the base is 0),
the base coming from the footer.

CRC-32C runs over every byte read (100+ MB snapshots), so it comes from ``google-crc32c``
(hardware accelerated C); the xxHash family from ``xxhash``.
"""

from __future__ import annotations

from enum import IntEnum

import google_crc32c
import xxhash

__all__ = [
    "DIGESTS",
    "ChecksumType",
    "compute_builtin_checksum",
    "context_modifier",
    "crc32c_mask",
    "crc32c_unmask",
]

_MASK_DELTA = 0xA282EAD8
_XXH3_LAST_BYTE_PRIME = 0x6B9083D9
_M32 = 0xFFFFFFFF


class ChecksumType(IntEnum):
    """``rocksdb::ChecksumType`` (``include/rocksdb/table.h``), as the footer's byte stores it."""

    NO_CHECKSUM = 0
    CRC32C = 1
    XXHASH = 2
    XXHASH64 = 3
    XXH3 = 4


#: The function behind each checksum type, for the compiled block reader
#: (``cdecoder.data_run``, which masks, drops the last byte and adds the context as
#: :func:`compute_builtin_checksum` and :func:`context_modifier` do).
DIGESTS = {
    ChecksumType.CRC32C: google_crc32c.value,
    ChecksumType.XXHASH: xxhash.xxh32_intdigest,
    ChecksumType.XXHASH64: xxhash.xxh64_intdigest,
    ChecksumType.XXH3: xxhash.xxh3_64_intdigest,
}


def crc32c_mask(crc: int) -> int:
    """``crc32c::Mask``: rotate right by 15 bits and add a constant (mod 2^32)."""
    return ((((crc >> 15) | (crc << 17)) & _M32) + _MASK_DELTA) & _M32


def crc32c_unmask(masked: int) -> int:
    """``crc32c::Unmask``, the inverse of :func:`crc32c_mask`."""
    rot = (masked - _MASK_DELTA) & _M32
    return ((rot >> 17) | (rot << 15)) & _M32


def compute_builtin_checksum(kind: ChecksumType, data: bytes) -> int:
    """``ComputeBuiltinChecksum(kind, data)``: the 32-bit checksum RocksDB stores."""
    if kind == ChecksumType.CRC32C:
        return crc32c_mask(google_crc32c.value(data))
    if kind == ChecksumType.XXH3:
        if not data:
            return 0
        body = memoryview(data)[:-1]
        value = xxhash.xxh3_64_intdigest(body) & _M32
        return value ^ ((data[-1] * _XXH3_LAST_BYTE_PRIME) & _M32)
    if kind == ChecksumType.XXHASH64:
        return xxhash.xxh64_intdigest(data) & _M32
    if kind == ChecksumType.XXHASH:
        return xxhash.xxh32_intdigest(data)
    return 0


def context_modifier(base_context_checksum: int, offset: int) -> int:
    """``ChecksumModifierForContext``: what format version 6 adds to a checksum at ``offset``."""
    if base_context_checksum == 0:
        return 0
    return (base_context_checksum ^ (((offset & _M32) + (offset >> 32)) & _M32)) & _M32
