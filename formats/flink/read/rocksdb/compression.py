"""Block decompression of block-based tables (format versions 2 and later).

Port of the read side of ``util/compression.cc`` (``BuiltinDecompressorV2``). The byte after a
block (its trailer's first byte) names the compression, ``rocksdb::CompressionType``
(``include/rocksdb/compression_type.h``):

========  =============================  =================================================
type      name                           payload (``compress_format_version`` 2)
========  =============================  =================================================
``0x00``  ``kNoCompression``             the block itself
``0x01``  ``kSnappyCompression``         raw Snappy (its own varint32 length preamble)
``0x02``  ``kZlibCompression``           varint32 size, then *raw* deflate (window bits -14)
``0x03``  ``kBZip2Compression``          varint32 size, then a bzip2 stream
``0x04``  ``kLZ4Compression``            varint32 size, then one raw LZ4 block
``0x05``  ``kLZ4HCCompression``          same as LZ4
``0x07``  ``kZSTD``                      varint32 size, then one zstd frame
``0x40``  ``kZSTDNotFinalCompression``   same as ZSTD (legacy name)
========  =============================  =================================================

``kXpressCompression`` (0x06, Windows only), custom compressions (0x80 and up) and dictionary
compression (a ``rocksdb.compression_dict`` meta block) raise
:class:`~statecore.errors.UnsupportedFormatError`.

Untrusted sizes: a block's declared decompressed size must be at most
:data:`MAX_BLOCK_SIZE` (64 MiB; RocksDB writes blocks of a few KiB to a few MiB), so a
decompression bomb costs at most that much memory per block, and the decompressed size must be
exactly the declared one. Snappy, LZ4 and ZSTD come from pyarrow's codecs (already a
dependency; C speed); Zlib and BZip2 from the standard library.
"""

from __future__ import annotations

import bz2
import zlib

import pyarrow as pa

from formats.flink.read.rocksdb.coding import corrupt, get_varint32
from statecore.errors import UnsupportedFormatError

__all__ = ["COMPRESSION_NAMES", "MAX_BLOCK_SIZE", "decompress_block"]

#: The largest decompressed block accepted (bytes).
MAX_BLOCK_SIZE = 64 << 20

NO_COMPRESSION = 0x00
SNAPPY = 0x01
ZLIB = 0x02
BZIP2 = 0x03
LZ4 = 0x04
LZ4HC = 0x05
XPRESS = 0x06
ZSTD = 0x07
ZSTD_NOT_FINAL = 0x40

#: ``CompressionTypeToString`` of the types above.
COMPRESSION_NAMES = {
    NO_COMPRESSION: "NoCompression",
    SNAPPY: "Snappy",
    ZLIB: "Zlib",
    BZIP2: "BZip2",
    LZ4: "LZ4",
    LZ4HC: "LZ4HC",
    XPRESS: "Xpress",
    ZSTD: "ZSTD",
    ZSTD_NOT_FINAL: "ZSTDNotFinal",
}


def _check_size(size: int, where: str, offset: int) -> None:
    if size > MAX_BLOCK_SIZE:
        raise corrupt(where, f"block at offset {offset} declares {size} decompressed bytes, over "
                             f"the limit of {MAX_BLOCK_SIZE}")


def _snappy_length(data: bytes, where: str, offset: int) -> int:
    # Snappy's preamble is a varint32 (snappy::GetUncompressedLength).
    size, _ = get_varint32(data, 0, len(data), f"{where} (Snappy block at offset {offset})")
    return size


def decompress_block(kind: int, data: bytes, where: str, offset: int) -> bytes:
    """The contents of the block at ``offset`` stored with compression ``kind`` as ``data``.

    ``where`` names the file for errors. Corrupt payloads (wrong sizes, bad streams) raise
    :class:`~statecore.errors.CorruptCheckpointError`; compressions this reader cannot decode
    raise :class:`~statecore.errors.UnsupportedFormatError`.
    """
    if kind == NO_COMPRESSION:
        return data
    if kind == SNAPPY:
        size = _snappy_length(data, where, offset)
        _check_size(size, where, offset)
        return _arrow(data, size, "snappy", where, offset)
    if kind in (XPRESS,) or kind >= 0x80 or kind not in COMPRESSION_NAMES:
        name = COMPRESSION_NAMES.get(kind, f"type 0x{kind:02x}")
        raise UnsupportedFormatError(f"{where}: block at offset {offset} uses {name} compression, "
                                     f"which this reader does not support (none, Snappy, Zlib, "
                                     f"BZip2, LZ4, LZ4HC, ZSTD are)")
    size, start = get_varint32(data, 0, len(data), f"{where} (block at offset {offset})")
    _check_size(size, where, offset)
    payload = data[start:]
    if kind in (LZ4, LZ4HC):
        out = _arrow(payload, size, "lz4_raw", where, offset)
        # pyarrow fills a buffer of the declared size without saying how much LZ4 wrote; a
        # payload that decodes to fewer bytes also fits one byte less, a complete one does not.
        if size > 0:
            try:
                pa.decompress(payload, decompressed_size=size - 1, codec="lz4_raw")
            except (pa.ArrowException, OSError, ValueError):
                return out
            raise corrupt(where, f"LZ4 block at offset {offset} is shorter than its declared "
                                 f"{size} bytes")
        return out
    if kind in (ZSTD, ZSTD_NOT_FINAL):
        return _arrow(payload, size, "zstd", where, offset)
    if kind == ZLIB:
        try:
            inflater = zlib.decompressobj(-14)
            out = inflater.decompress(payload, size + 1)
        except zlib.error as exc:
            raise corrupt(where, f"Zlib block at offset {offset}: {exc}") from exc
        ok = len(out) == size and inflater.eof
    else:  # BZIP2
        try:
            unbzip = bz2.BZ2Decompressor()
            out = unbzip.decompress(payload, size + 1)
        except (OSError, ValueError, EOFError) as exc:
            raise corrupt(where, f"BZip2 block at offset {offset}: {exc}") from exc
        ok = len(out) == size and unbzip.eof
    if not ok:
        raise corrupt(where, f"{COMPRESSION_NAMES[kind]} block at offset {offset} does not "
                             f"decompress to its declared {size} bytes")
    return out


def _arrow(payload: bytes, size: int, codec: str, where: str, offset: int) -> bytes:
    try:
        out = pa.decompress(payload, decompressed_size=size, codec=codec, asbytes=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise corrupt(where, f"{codec} block at offset {offset} does not decompress: "
                             f"{exc}") from exc
    if len(out) != size:
        raise corrupt(where, f"{codec} block at offset {offset} decompressed to {len(out)} bytes, "
                             f"{size} declared")
    return out  # type: ignore[no-any-return]
