"""Decoding the blocks of a block-based table: data, index and meta blocks.

Port of ``BlockBuilder`` (``table/block_based/block_builder.cc``), read back as ``Block``,
``DataBlockIter``, ``IndexBlockIter`` and ``MetaBlockIter`` do (``table/block_based/block.cc``,
``block_util.h``, ``data_block_footer.cc``).

A block is a run of entries, then the restart array, then a packed ``uint32LE``::

    entry:   shared: varint32 | non_shared: varint32 | value_length: varint32 (NOTE)
             | key_delta: non_shared bytes | value: value_length bytes
    trailer: restarts: uint32LE[num_restarts] | packed: uint32LE

Each key is the previous key's first ``shared`` bytes followed by ``key_delta``; a restart point
(every ``restart_interval`` entries, the offsets listed in ``restarts``) stores ``shared = 0``.
``packed`` holds ``num_restarts`` in its low 28 bits (31 in RocksDB 8, which never writes more
than 2^28); bit 31 marks a data block with a hash index (``kDataBlockBinaryAndHash``: between
the restart array and ``packed`` lie ``num_buckets`` one-byte buckets and a ``uint16LE``
``num_buckets``, both ignored here); bit 29 marks uniformly distributed keys (a search hint,
ignored); bit 28 (keys and values in separate sections, RocksDB 11) is refused; bit 30 is
reserved (corruption).

NOTE: index blocks of ``format_version >= 4`` whose property
``rocksdb.index.value.is.delta.encoded`` is set omit ``value_length``: the value is a block
handle (two varint64s: offset, size) when ``shared == 0``, else only the zigzag varint64 size
delta to the previous handle, the offset being the previous handle's end plus the 5-byte block
trailer (``IndexValue::DecodeFrom``, ``table/format.cc``). Index keys are internal keys unless
``rocksdb.index.key.is.user.key`` is set. Index type ``kBinarySearchWithFirstKey`` appends the
block's first internal key, length-prefixed, to each value.

Every offset and length is checked against the block: a corrupt block raises
:class:`~statecore.errors.CorruptCheckpointError` naming the file and the block's offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import numpy as np

from formats.flink.read.compiled import SPEEDUPS
from formats.flink.read.rocksdb.coding import (
    U32,
    U64,
    corrupt,
    get_length_prefixed,
    get_varint32,
    get_varint64,
    get_varsigned64,
)
from formats.flink.read.rocksdb.footer import BLOCK_TRAILER_SIZE, BlockHandle
from statecore.errors import UnsupportedFormatError

__all__ = [
    "DataBlock",
    "IndexBlock",
    "block_layout",
    "decode_data_block",
    "decode_data_blocks",
    "decode_meta_block",
]

_HASH_INDEX_BIT = 1 << 31
_RESERVED_BIT = 1 << 30
_UNIFORM_KEYS_BIT = 1 << 29
_SEPARATED_KV_BIT = 1 << 28
_MAX_NUM_RESTARTS = (1 << 28) - 1
_HEADER = struct.Struct("3B")  # an entry's three varints when each is one byte

#: A decoded data block: user keys, packed ``(sequence << 8) | type`` trailers, values.
DataBlock = tuple[list[bytes], list[int], list[bytes]]


def block_layout(block: bytes, where: str) -> tuple[int, int]:
    """``(restarts_offset, num_restarts)`` of ``block``: where its entries end, how many restarts.

    Port of ``Block::Block`` / ``DataBlockFooter::DecodeFrom``. ``where`` names the file and block.
    """
    size = len(block)
    if size < 4:
        raise corrupt(where, f"block of {size} bytes is too small for its footer")
    packed = U32.unpack_from(block, size - 4)[0]
    end = size - 4
    if packed & _SEPARATED_KV_BIT:
        raise UnsupportedFormatError(f"{where}: block stores keys and values in separate sections "
                                     f"(RocksDB 11 data block format), which is not supported")
    if packed & _RESERVED_BIT:
        raise corrupt(where, "block footer has the reserved bit 30 set")
    if packed & _HASH_INDEX_BIT:
        if end < 2 or end >= 1 << 16:
            raise corrupt(where, "block with a hash index is too small or over 64 KiB")
        num_buckets = struct.unpack_from("<H", block, end - 2)[0]
        if num_buckets == 0 or num_buckets + 2 > end:
            raise corrupt(where, f"hash index of {num_buckets} buckets does not fit the block")
        end -= 2 + num_buckets
    num_restarts = packed & _MAX_NUM_RESTARTS & ~_UNIFORM_KEYS_BIT
    if num_restarts * 4 > end:
        raise corrupt(where, f"{num_restarts} restart points do not fit a block of {size} bytes")
    restarts_offset = end - 4 * num_restarts
    if num_restarts == 0 and restarts_offset != 0:
        raise corrupt(where, "block has entries but no restart point")
    return restarts_offset, num_restarts


def _entry_header(block: bytes, pos: int, limit: int, where: str) -> tuple[int, int, int, int]:
    """The slow path of ``DecodeEntry``: three varint32s, the position after them."""
    shared, pos = get_varint32(block, pos, limit, where)
    non_shared, pos = get_varint32(block, pos, limit, where)
    value_length, pos = get_varint32(block, pos, limit, where)
    return shared, non_shared, value_length, pos


def decode_data_block(block: bytes, where: str, global_seqno: int = 0) -> DataBlock:
    """Every entry of a data block, as parallel lists (``DataBlock``), in block order.

    The keys are internal keys: each is split into its user key and its 8-byte trailer
    (``uint64LE`` ``(sequence << 8) | type``). ``global_seqno`` (an ingested file's, non-zero)
    replaces every entry's sequence number, as ``DataBlockIter`` does.
    """
    limit, num_restarts = block_layout(block, where)
    user_keys: list[bytes] = []
    trailers: list[int] = []
    values: list[bytes] = []
    add_key = user_keys.append
    add_trailer = trailers.append
    add_value = values.append
    unpack = U64.unpack_from
    header = _HEADER.unpack_from
    key = b""
    pos = 0
    try:
        # The hot loop: one pass, a fast path for the one-byte varints of small entries. Reading
        # 3 bytes at pos cannot fail: pos < limit <= len(block) - 4. An entry running past the
        # entries' end ends the loop (pos > limit), checked once after it: the slices it took
        # are only ever returned when none did.
        while pos < limit:
            shared, non_shared, value_length = header(block, pos)
            if (shared | non_shared | value_length) < 128:
                pos += 3
            else:
                shared, non_shared, value_length, pos = _entry_header(block, pos, limit, where)
            end = pos + non_shared
            if shared:
                if shared > len(key):
                    raise corrupt(where, f"entry at byte {pos} shares {shared} bytes with a "
                                         f"previous key of {len(key)}")
                key = key[:shared] + block[pos:end]
            else:
                key = block[pos:end]
            pos = end + value_length
            add_trailer(unpack(key, -8)[0])  # struct.error when the key is shorter than 8
            add_key(key[:-8])
            add_value(block[end:pos])
    except struct.error:
        if pos > limit:
            raise _runs_past(where, pos, limit) from None
        raise corrupt(where, f"internal key of {len(key)} bytes is shorter than 8") from None
    if pos > limit:
        raise _runs_past(where, pos, limit)
    if global_seqno:
        trailers = [(global_seqno << 8) | (t & 0xFF) for t in trailers]
    return user_keys, trailers, values


def decode_data_blocks(blocks: Sequence[bytes], wheres: Sequence[str], global_seqno: int = 0
                       ) -> tuple[DataBlock, list[int], frozenset[int]] | None:
    """Consecutive data blocks decoded at once: their entries concatenated, where each starts.

    The same entries as :func:`decode_data_block` of each block, one after the other, with the
    index of each block's first entry and the set of value types of the trailers; ``None`` when
    the blocks are not all *simple*, and the caller decodes them one by one (which also raises
    the error a corrupt block deserves). A block is simple when every entry's three varints take
    one byte, its internal key's 8-byte trailer lies in its ``key_delta`` (``non_shared >= 8``)
    and its ``shared`` bytes are within the previous user key (0 for a block's first entry):
    what ``BlockBuilder::AddWithLastKeyImpl`` (``table/block_based/block_builder.cc``) writes
    for keys and values under 128 bytes when consecutive user keys differ. The user key is then
    built directly, and one vectorised pass over all the blocks checks those conditions and reads
    the trailers, instead of entry by entry (``numpy``: unaligned ``uint32``/``uint64`` views).
    """
    if not blocks:
        return ([], [], []), [], frozenset()
    buf = b"".join(blocks)
    keys: list[bytes] = []
    values: list[bytes] = []
    heads: list[int] = []  # where each entry's header is in ``buf``
    add_key, add_value, add_head = keys.append, values.append, heads.append
    header = _HEADER.unpack_from
    starts: list[int] = []
    base = 0
    for block, where in zip(blocks, wheres, strict=True):
        limit = base + block_layout(block, where)[0]
        starts.append(len(keys))
        key = b""
        pos = base
        if SPEEDUPS is not None:  # the loop below, compiled (formats.flink.read.speedups)
            held = len(keys)
            stopped = SPEEDUPS.simple_entries(buf, pos, limit, keys, values, heads)
            if stopped is not None:
                pos = stopped
            else:  # a header past the buffer's end: the loop below says so
                del keys[held:], values[held:], heads[held:]
        # Nothing is checked in the loop but the end: the header's 3 bytes are before the
        # block's restart array, every slice is under 512 bytes, and what an entry that is not
        # simple makes of them is never returned (the checks after the loop find it).
        while pos < limit:
            add_head(pos)
            shared, non_shared, value_length = header(buf, pos)
            end = pos + 3 + non_shared
            key = key[:shared] + buf[pos + 3:end - 8]
            pos = end + value_length
            add_key(key)
            add_value(buf[end:pos])
        if pos != limit:
            return None
        base += len(block)
    if not heads:
        return ([], [], []), starts, frozenset()
    at = np.array(heads, dtype=np.intp)
    # every entry's first 4 bytes, and then 8 bytes at any offset, as unaligned integers
    first4 = np.ndarray((len(buf) - 3,), "<u4", buf, 0, (1,))[at]
    if bool((first4 & 0x808080).any()):
        return None  # a varint of more than one byte
    shared_a = (first4 & 0xFF).astype(np.intp)
    non_shared_a = ((first4 >> 8) & 0xFF).astype(np.intp)
    if int(non_shared_a.min()) < 8:
        return None
    user_len = shared_a + non_shared_a - 8
    room = np.empty_like(user_len)  # the previous user key's length; 0 at a block's start
    room[0] = 0
    room[1:] = user_len[:-1]
    room[[i for i in starts if i < len(heads)]] = 0  # (an empty block starts nothing)
    if bool((shared_a > room).any()):
        return None
    trailers_a = np.ndarray((len(buf) - 7,), "<u8", buf, 0, (1,))[at + non_shared_a - 5]
    first = int(trailers_a[0])
    if global_seqno:
        trailers_a = (trailers_a & 0xFF) | np.uint64(global_seqno << 8)
        first = int(trailers_a[0])
    if bool((trailers_a == trailers_a[0]).all()):
        # a bottommost table's entries: one trailer for all, its sequence number zeroed
        return (keys, [first] * len(keys), values), starts, frozenset({first & 0xFF})
    types = frozenset(np.unique(trailers_a & 0xFF).tolist())
    return (keys, trailers_a.tolist(), values), starts, types


def _runs_past(where: str, pos: int, limit: int) -> Exception:
    return corrupt(where, f"entry ending at byte {pos} runs past the entries' end ({limit})")


def decode_meta_block(block: bytes, where: str) -> list[tuple[bytes, bytes, int]]:
    """Every ``(key, value, value offset in the block)`` of a meta block, in order.

    Meta blocks are the metaindex, the properties and the range deletions; keys as stored.
    """
    limit, _ = block_layout(block, where)
    entries: list[tuple[bytes, bytes, int]] = []
    key = b""
    pos = 0
    while pos < limit:
        shared, non_shared, value_length, pos = _entry_header(block, pos, limit, where)
        end = pos + non_shared
        if shared > len(key):
            raise corrupt(where, f"entry at byte {pos} shares {shared} bytes with a previous key "
                                 f"of {len(key)}")
        key = key[:shared] + block[pos:end]
        pos = end + value_length
        if pos > limit:
            raise corrupt(where, f"entry ending at byte {pos} runs past the entries' end ({limit})")
        entries.append((key, block[end:pos], end))
    return entries


class IndexBlock:
    """An index block (or a partition, or the top level of a partitioned index).

    Port of ``IndexBlockIter``: entries are ``(separator user key, BlockHandle)``; every data
    block's keys are at most its separator and above the previous separator. :meth:`seek`
    binary-searches the restart points (``BinarySeekRestartPointIndex``) and decodes only from
    there. Entries must come in increasing key and block offset order, else the iteration raises
    :class:`~statecore.errors.CorruptCheckpointError`.
    """

    __slots__ = ("_block", "_where", "_limit", "_num_restarts", "_delta", "_with_seq",
                 "_first_key")

    def __init__(self, block: bytes, where: str, *, value_delta_encoded: bool,
                 key_includes_seq: bool, have_first_key: bool) -> None:
        self._block = block
        self._where = where
        self._limit, self._num_restarts = block_layout(block, where)
        self._delta = value_delta_encoded
        self._with_seq = key_includes_seq
        self._first_key = have_first_key

    def __iter__(self) -> Iterator[tuple[bytes, BlockHandle]]:
        if self._num_restarts == 0:
            return iter(())
        return self._entries_from(self._restart_point(0), b"")

    def seek(self, target: bytes) -> Iterator[tuple[bytes, BlockHandle]]:
        """The entries from the first whose separator's user key is ``>= target`` on.

        The data block of that entry is the first that can hold ``target``.
        """
        if self._num_restarts == 0:
            return iter(())
        return self._entries_from(self._seek_point(target), target)

    def _seek_point(self, target: bytes) -> int:
        """Where the last restart point whose key is < target (or the first one) starts."""
        lo, hi = 0, self._num_restarts - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._restart_key(mid) < target:
                lo = mid
            else:
                hi = mid - 1
        return self._restart_point(lo)

    def listed(self, target: bytes | None, end: bytes | None
               ) -> tuple[list[bytes], list[int], list[int]] | None:
        """The entries of :meth:`seek`, listed by the compiled decoder.

        Those iterating gives when ``target`` is ``None``; up to the first whose key is
        ``>= end`` (included), as lists of separators, block offsets and sizes. ``None``
        without the compiled decoder, or where iterating would raise (then iterating says why).
        """
        if SPEEDUPS is None:
            return None
        if self._num_restarts == 0:
            return [], [], []
        # as iterating (``target`` None) or :meth:`seek` start
        at = self._restart_point(0) if target is None else self._seek_point(target)
        listed = SPEEDUPS.index_run(self._block, at, self._limit, self._delta, self._with_seq,
                                    self._first_key, target or b"", end)
        return listed  # type: ignore[no-any-return]

    def _restart_point(self, index: int) -> int:
        offset = U32.unpack_from(self._block, self._limit + 4 * index)[0]
        if offset > self._limit:
            raise corrupt(self._where, f"restart point {index} at byte {offset} is past the "
                                       f"entries' end ({self._limit})")
        return int(offset)

    def _restart_key(self, index: int) -> bytes:
        pos = self._restart_point(index)
        block, limit, where = self._block, self._limit, self._where
        shared, pos = get_varint32(block, pos, limit, where)
        non_shared, pos = get_varint32(block, pos, limit, where)
        if not self._delta:
            _, pos = get_varint32(block, pos, limit, where)
        if shared != 0 or pos + non_shared > limit:
            raise corrupt(where, f"bad entry at restart point {index}")
        return self._user_key(block[pos:pos + non_shared])

    def _user_key(self, key: bytes) -> bytes:
        if not self._with_seq:
            return key
        if len(key) < 8:
            raise corrupt(self._where, f"index key of {len(key)} bytes is shorter than 8")
        return key[:-8]

    def _entries_from(self, pos: int, target: bytes) -> Iterator[tuple[bytes, BlockHandle]]:
        block, limit, where = self._block, self._limit, self._where
        key = b""
        previous: BlockHandle | None = None
        previous_user_key = b""
        while pos < limit:
            shared, pos = get_varint32(block, pos, limit, where)
            non_shared, pos = get_varint32(block, pos, limit, where)
            if self._delta:
                value_length = -1
            else:
                value_length, pos = get_varint32(block, pos, limit, where)
            end = pos + non_shared
            if shared > len(key) or end > limit:
                raise corrupt(where, f"bad index entry at byte {pos}")
            key = key[:shared] + block[pos:end]
            value_end = limit if value_length < 0 else end + value_length
            if value_end > limit:
                raise corrupt(where, f"index value at byte {end} runs past the entries' end")
            if self._delta and shared and previous is not None:
                delta, pos = get_varsigned64(block, end, value_end, where)
                handle = BlockHandle(previous.offset + previous.size + BLOCK_TRAILER_SIZE,
                                     previous.size + delta)
                if handle.size < 0:
                    raise corrupt(where, f"index entry at byte {end} has a negative block size")
            elif self._delta and shared:
                raise corrupt(where, f"delta-encoded index entry at byte {end} has no "
                                     f"previous handle")
            else:
                offset, pos = get_varint64(block, end, value_end, where)
                size, pos = get_varint64(block, pos, value_end, where)
                handle = BlockHandle(offset, size)
            if self._first_key:
                _, pos = get_length_prefixed(block, pos, value_end, where)
            if value_length >= 0:
                pos = value_end
            user_key = self._user_key(key)
            if previous is not None and (user_key < previous_user_key
                                         or handle.offset <= previous.offset):
                raise corrupt(where, f"index entries out of order at byte {end}")
            previous, previous_user_key = handle, user_key
            if user_key >= target:
                yield user_key, handle
