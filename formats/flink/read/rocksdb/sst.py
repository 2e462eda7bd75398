"""Reading one block-based table (SST file) of RocksDB: blocks, index, iteration and seek.

Port of the read path of ``BlockBasedTable`` (``table/block_based/block_based_table_reader.cc``,
``block_fetcher.cc``, ``partitioned_index_reader.cc``, ``table/meta_blocks.cc``):

1. the footer (:mod:`.footer`) gives the checksum type, the format version and the metaindex;
2. every block is read with its 5-byte trailer, its checksum verified (:mod:`.checksums`) and
   decompressed (:mod:`.compression`);
3. the metaindex (a meta block: name -> block handle, names strictly increasing) locates
   ``rocksdb.properties`` (:mod:`.properties`), ``rocksdb.range_del``, ``rocksdb.index``
   (format version 6) and ``rocksdb.compression_dict`` (refused);
4. the index (:class:`~.block.IndexBlock`) maps separators to data blocks; a two-level index
   (``kTwoLevelIndexSearch``) maps separators to index partitions first;
5. data blocks (:func:`~.block.decode_data_block`) hold the internal keys and values.

The whole file is given as bytes (the caller reads it with its own size limits); nothing is
read that the index does not point to. Only the bytewise comparator
(``leveldb.BytewiseComparator``) is supported: other comparators raise
:class:`~statecore.errors.UnsupportedFormatError` because key order (and so seek and the live
view) would differ.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass

from formats.flink.read.compiled import SPEEDUPS
from formats.flink.read.rocksdb.block import (
    DataBlock,
    IndexBlock,
    decode_data_block,
    decode_data_blocks,
    decode_meta_block,
)
from formats.flink.read.rocksdb.checksums import (
    DIGESTS,
    ChecksumType,
    compute_builtin_checksum,
    context_modifier,
)
from formats.flink.read.rocksdb.coding import U32, U64, Buffer, corrupt
from formats.flink.read.rocksdb.compression import COMPRESSION_NAMES, decompress_block
from formats.flink.read.rocksdb.dbformat import (
    SUPPORTED_VALUE_TYPES,
    UNSUPPORTED_VALUE_TYPES,
    ValueType,
)
from formats.flink.read.rocksdb.footer import (
    BLOCK_TRAILER_SIZE,
    BlockHandle,
    Footer,
    decode_block_handle,
    decode_footer,
)
from formats.flink.read.rocksdb.properties import IndexType, TableProperties, parse_properties
from statecore.errors import UnsupportedFormatError

__all__ = ["BYTEWISE_COMPARATOR", "RangeTombstone", "SstFile", "open_sst"]

BYTEWISE_COMPARATOR = "leveldb.BytewiseComparator"
PROPERTIES_BLOCK = b"rocksdb.properties"
PROPERTIES_BLOCK_OLD = b"rocksdb.stats"
RANGE_DEL_BLOCK = b"rocksdb.range_del"
INDEX_BLOCK = b"rocksdb.index"
COMPRESSION_DICT_BLOCK = b"rocksdb.compression_dict"

_VALUES_ONLY = frozenset({int(ValueType.VALUE)})

#: Data blocks are read and decoded a run at a time: a run ends with the block that brings its
#: decompressed size to this many bytes (or the table's or range's end).
RUN_BYTES = 64 << 10

#: One internal entry: ``(user_key, sequence, value_type, value)``.
Entry = tuple[bytes, int, int, bytes]


@dataclass(frozen=True, slots=True)
class RangeTombstone:
    """A range deletion: every key ``start <= key < end`` with a sequence below ``sequence``."""

    start: bytes
    end: bytes
    sequence: int


def open_sst(data: Buffer, name: str, *, verify_checksums: bool = True,
             largest_seqno: int | None = None) -> SstFile:
    """Open the block-based table whose whole content is ``data``; ``name`` names it in errors.

    Reads the footer, metaindex, properties and index now; data blocks when iterated.
    ``largest_seqno`` (from the MANIFEST) resolves the global sequence number of an ingested
    file as RocksDB does. Raises :class:`~statecore.errors.CorruptCheckpointError` or
    :class:`~statecore.errors.UnsupportedFormatError`, each naming ``name``.
    """
    return SstFile(data, name, verify_checksums=verify_checksums, largest_seqno=largest_seqno)


class SstFile:
    """An opened block-based table (``BlockBasedTable``), immutable.

    ``footer``, ``properties`` and ``meta_blocks`` (metaindex: name -> handle) are decoded on
    open; iteration (:meth:`entries`, :meth:`data_blocks`) reads and verifies the data blocks it
    needs. Entries come in internal-key order: user key ascending (bytewise), then sequence
    number descending.
    """

    def __init__(self, data: Buffer, name: str, *, verify_checksums: bool = True,
                 largest_seqno: int | None = None) -> None:
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.name = name
        self.verify_checksums = verify_checksums
        self.footer: Footer = decode_footer(self.data, name)
        self.meta_blocks = self._read_metaindex()
        self.properties: TableProperties = self._read_properties()
        props = self.properties
        if props.comparator_name not in (None, BYTEWISE_COMPARATOR):
            raise UnsupportedFormatError(f"{name}: comparator {props.comparator_name!r} is not "
                                         f"supported (only {BYTEWISE_COMPARATOR})")
        has_dict = COMPRESSION_DICT_BLOCK in self.meta_blocks
        if props.user_defined_timestamps_persisted == 0 or has_dict:
            feature = "a compression dictionary" if has_dict else "user-defined timestamps"
            raise UnsupportedFormatError(f"{name}: the table uses {feature}, which is not "
                                         f"supported")
        if props.separate_key_value_in_data_block:
            raise UnsupportedFormatError(f"{name}: data blocks with separate key and value "
                                         f"sections are not supported")
        if props.index_type not in (IndexType.BINARY_SEARCH, IndexType.HASH_SEARCH,
                                    IndexType.TWO_LEVEL_INDEX_SEARCH,
                                    IndexType.BINARY_SEARCH_WITH_FIRST_KEY):
            raise UnsupportedFormatError(f"{name}: index type {props.index_type} is not "
                                         f"supported")
        self.global_seqno = self._global_seqno(largest_seqno)
        if self.footer.index_handle is not None:
            self.index_handle = self.footer.index_handle
        elif INDEX_BLOCK in self.meta_blocks:
            self.index_handle = self.meta_blocks[INDEX_BLOCK]
        else:
            raise corrupt(name, "format_version 6 table without a rocksdb.index meta block")
        self._index = self._index_block(self.index_handle, "index")
        self._tombstones: tuple[RangeTombstone, ...] | None = None

    def __repr__(self) -> str:
        return (f"SstFile({self.name!r}, format_version={self.footer.format_version}, "
                f"column_family={self.properties.column_family_name!r})")

    # -- blocks -----------------------------------------------------------------------------

    def read_block(self, handle: BlockHandle, kind: str, *, compressed: bool = True,
                   verify: bool | None = None) -> bytes:
        """The contents of the block at ``handle``, ``kind`` naming it in errors.

        Bounds-checked, checksum-verified (``verify``, by default the table's
        ``verify_checksums``) and decompressed; ``compressed=False`` for the blocks RocksDB
        never compresses.
        """
        where = f"{self.name} ({kind} block at offset {handle.offset})"
        offset, size = handle.offset, handle.size
        end = offset + size
        if end + BLOCK_TRAILER_SIZE > self.footer.footer_offset:
            raise corrupt(where, f"block of {size} bytes runs past the table's end "
                                 f"({self.footer.footer_offset})")
        data = self.data
        block = data[offset:end]
        compression = data[end]
        if self.verify_checksums if verify is None else verify:
            self._verify(block, offset, where)
        if compression and not compressed:
            raise corrupt(where, f"block is {COMPRESSION_NAMES.get(compression, compression)}-"
                                 f"compressed where RocksDB writes it uncompressed")
        return decompress_block(compression, block, where, offset)

    def _checksum_matches(self, data: bytes, handle: BlockHandle) -> bool:
        """Whether the trailer of the block at ``handle`` in ``data`` holds its checksum."""
        kind = self.footer.checksum_type
        if kind == ChecksumType.NO_CHECKSUM:
            return True
        end = handle.offset + handle.size
        stored = U32.unpack_from(data, end + 1)[0]
        modifier = context_modifier(self.footer.base_context_checksum, handle.offset)
        computed = compute_builtin_checksum(kind, data[handle.offset:end + 1])
        return bool((stored - modifier) & 0xFFFFFFFF == computed)

    def _verify(self, block: bytes, offset: int, where: str) -> None:
        """Port of ``VerifyBlockChecksum``: the stored checksum, context removed, must match."""
        kind = self.footer.checksum_type
        if kind == ChecksumType.NO_CHECKSUM:
            return
        end = offset + len(block)
        stored = U32.unpack_from(self.data, end + 1)[0]
        modifier = context_modifier(self.footer.base_context_checksum, offset)
        computed = compute_builtin_checksum(kind, self.data[offset:end + 1])
        if (stored - modifier) & 0xFFFFFFFF != computed:
            raise corrupt(where, f"block checksum mismatch ({kind.name}): stored "
                                 f"0x{(stored - modifier) & 0xFFFFFFFF:08x}, computed "
                                 f"0x{computed:08x}")

    def _read_metaindex(self) -> dict[bytes, BlockHandle]:
        handle = self.footer.metaindex_handle
        where = f"{self.name} (metaindex block)"
        entries = decode_meta_block(self.read_block(handle, "metaindex"), where)
        blocks: dict[bytes, BlockHandle] = {}
        last: bytes | None = None
        for key, value, _ in entries:
            if last is not None and key <= last:
                raise corrupt(where, "metaindex keys are not strictly increasing")
            last = key
            blocks[key], _ = decode_block_handle(value, 0, len(value), where)
        return blocks

    def _read_properties(self) -> TableProperties:
        handle = self.meta_blocks.get(PROPERTIES_BLOCK) or self.meta_blocks.get(
            PROPERTIES_BLOCK_OLD)
        if handle is None:
            raise corrupt(self.name, "no properties block in the metaindex")
        where = f"{self.name} (properties block at offset {handle.offset})"
        # Parsed before it is verified, as ReadTablePropertiesHelper does: the global seqno's
        # offset is needed to verify an ingested file.
        block = self.read_block(handle, "properties", compressed=False, verify=False)
        entries = decode_meta_block(block, where)
        props = parse_properties([(k, v, handle.offset + o) for k, v, o in entries], where)
        if self.verify_checksums and not self._checksum_matches(self.data, handle):
            # An ingested file whose global seqno was rewritten in place: its checksum was taken
            # with the field at 0 (the retry of ReadTablePropertiesHelper).
            at = props.global_seqno_offset
            patched = None if at is None else self.data[:at] + bytes(8) + self.data[at + 8:]
            if patched is None or not self._checksum_matches(patched, handle):
                self._verify(self.data[handle.offset:handle.offset + handle.size],
                             handle.offset, where)
        return props

    def _global_seqno(self, largest_seqno: int | None) -> int:
        """``GetGlobalSequenceNumber``: 0 unless this is an ingested (version 2) external file."""
        props = self.properties
        version = props.external_sst_file_version
        if version is None:
            if props.global_seqno is not None:
                raise corrupt(self.name, "a non-external SST file has a global seqno property")
            return 0
        if version != 2:
            if version != 1:
                raise corrupt(self.name, f"an external SST file has corrupted version {version}")
            if props.global_seqno is not None:
                raise corrupt(self.name, "a version 1 external SST file has a global seqno")
            return 0
        seqno = props.global_seqno or 0
        if largest_seqno is not None:
            if seqno == 0:
                seqno = largest_seqno
            if seqno != largest_seqno:
                raise corrupt(self.name, f"global seqno {seqno} differs from the file's largest "
                                         f"seqno {largest_seqno}")
        return seqno

    # -- index --------------------------------------------------------------------------------

    def _index_block(self, handle: BlockHandle, kind: str) -> IndexBlock:
        props = self.properties
        fv = self.footer.format_version
        return IndexBlock(
            self.read_block(handle, kind),
            f"{self.name} ({kind} block at offset {handle.offset})",
            value_delta_encoded=fv >= 4 and bool(props.index_value_is_delta_encoded),
            key_includes_seq=not props.index_key_is_user_key,
            have_first_key=props.index_type == IndexType.BINARY_SEARCH_WITH_FIRST_KEY,
        )

    def index_entries(self, start: bytes | None = None) -> Iterator[tuple[bytes, BlockHandle]]:
        """``(separator user key, data block handle)`` of every data block, in order.

        From the first block that can hold ``start`` when given (``IndexBlockIter::Seek``).
        """
        top = self._index if start is None else self._index.seek(start)
        if self.properties.index_type != IndexType.TWO_LEVEL_INDEX_SEARCH:
            yield from top
            return
        last_offset = -1
        for _, partition_handle in top:
            partition = self._index_block(partition_handle, "index partition")
            for key, handle in partition if start is None else partition.seek(start):
                # Blocks of consecutive partitions follow each other too: a partition pointing
                # backwards is corrupt (and cannot make the scan revisit blocks).
                if handle.offset <= last_offset:
                    raise corrupt(self.name, f"index partition at offset "
                                             f"{partition_handle.offset} points back to offset "
                                             f"{handle.offset}")
                last_offset = handle.offset
                yield key, handle

    # -- data -------------------------------------------------------------------------------

    def data_blocks(self, start: bytes | None = None,
                    end: bytes | None = None) -> Iterator[DataBlock]:
        """The decoded data blocks (user keys, packed trailers, values), in order.

        Only those that can hold user keys in ``[start, end)`` (all when ``None``) are read; the
        first and last may hold keys outside the range. Consecutive blocks may come as one
        (:meth:`typed_data_blocks`).
        """
        for block, *_ in self.typed_data_blocks(start, end):
            yield block

    def typed_data_blocks(self, start: bytes | None = None, end: bytes | None = None
                          ) -> Generator[tuple[DataBlock, frozenset[int], int | None], None, None]:
        """:meth:`data_blocks`, each with its entries' value types and its keys' order.

        The order as :func:`.merge._key_order` gives it, where known (else ``None``). Blocks
        are read a run at a time (about :data:`RUN_BYTES` of them as stored): by the compiled
        decoder (:meth:`_compiled_run`) until it gives a run back, then by the Python readers,
        which decode a run together while its blocks are simple
        (:func:`~.block.decode_data_blocks`), else one block at a time. Each run comes as one
        block.
        """
        listed = (self._index.listed(start, end)
                  if self.properties.index_type != IndexType.TWO_LEVEL_INDEX_SEARCH else None)
        runs = (self._listed_runs(*listed) if listed is not None
                else self._indexed_runs(start, end))
        previous = b""
        simple = True  # until a block is not: then the rest of the table one block at a time
        compiled = SPEEDUPS is not None  # until it gives a run back: then the Python readers
        told: bool | None = None  # (a generator is started with None)
        while True:
            try:
                separators, chosen = runs.send(told)
            except StopIteration:
                return
            found = self._compiled_run(chosen, separators, previous) if compiled else None
            if found is not None:  # checked against the index as below, and its order known
                (keys, trailers, values), types, order = found
                previous = keys[-1] if keys else previous
                told = True
                yield (keys, trailers, values), types, order
                continue
            compiled = False
            run = self._run([BlockHandle(o, z) for o, z in chosen], simple)
            (keys, trailers, values), starts, types, simple = run
            told = simple
            for i, (offset, _) in enumerate(chosen):
                lo, hi = starts[i], starts[i + 1] if i + 1 < len(starts) else len(keys)
                if hi > lo:
                    if keys[lo] < previous:
                        raise corrupt(self._data_where(offset), "data block's first key is below "
                                                                "the previous block's last key")
                    if keys[hi - 1] > separators[i]:
                        raise corrupt(self._data_where(offset), "data block holds keys above its "
                                                                "index separator")
                    previous = keys[hi - 1]
            if not types <= SUPPORTED_VALUE_TYPES:
                for i, (offset, _) in enumerate(chosen):
                    hi = starts[i + 1] if i + 1 < len(starts) else len(keys)
                    _check_types(_types(trailers[starts[i]:hi]), self._data_where(offset))
            yield (keys, trailers, values), types if types != _VALUES_ONLY else _VALUES_ONLY, None

    #: What :meth:`typed_data_blocks` reads next: separators and ``(offset, size)`` of a run
    #: of data blocks; sent whether blocks are still read in runs (else one at a time).
    _Runs = Generator[tuple[list[bytes], list[tuple[int, int]]], bool | None, None]

    def _indexed_runs(self, start: bytes | None, end: bytes | None) -> _Runs:
        """The runs of blocks that can hold ``[start, end)``, from iterating the index."""
        handles = self.index_entries(start)
        simple = True
        done = False
        while not done:
            separators: list[bytes] = []
            chosen: list[tuple[int, int]] = []
            size = 0
            done = True
            for separator, handle in handles:
                separators.append(separator)
                chosen.append((handle.offset, handle.size))
                size += handle.size
                if end is not None and separator >= end:
                    break
                if size >= RUN_BYTES or not simple:
                    done = False
                    break
            if not chosen:
                return
            simple = bool((yield separators, chosen))

    def _listed_runs(self, separators: list[bytes], offsets: list[int], sizes: list[int]
                     ) -> _Runs:
        """The runs of :meth:`_indexed_runs`, from the index's entries listed at once."""
        at, n = 0, len(separators)
        simple = True
        while at < n:
            upto, size = at, 0
            while upto < n:
                size += sizes[upto]
                upto += 1
                if size >= RUN_BYTES or not simple:
                    break
            simple = bool((yield (separators[at:upto],
                                  list(zip(offsets[at:upto], sizes[at:upto], strict=True)))))
            at = upto

    def _data_where(self, offset: int) -> str:
        return f"{self.name} (data block at offset {offset})"

    def _compiled_run(self, chosen: list[tuple[int, int]], separators: list[bytes],
                      previous: bytes) -> tuple[DataBlock, frozenset[int], int] | None:
        """A run of data blocks read and decoded by the compiled decoder.

        The same as :meth:`_run` gives (:meth:`read_block` of each, then
        :func:`~.block.decode_data_block`) where it takes the run: blocks uncompressed or
        Snappy, their checksums right, well formed, without a hash index, each block's keys
        above ``previous`` (the block before's last) and at most its separator, their value
        types all supported. With the order of the run's keys (:func:`.merge._key_order`'s).
        ``None`` otherwise, or without the compiled decoder: :meth:`_run` reads the run and
        :meth:`typed_data_blocks` says what is wrong with it.
        """
        if SPEEDUPS is None:
            return None
        footer = self.footer
        kind = footer.checksum_type if self.verify_checksums else ChecksumType.NO_CHECKSUM
        found = SPEEDUPS.data_run(self.data, [o for o, _ in chosen], [z for _, z in chosen],
                                  footer.footer_offset, int(kind), DIGESTS.get(kind),
                                  footer.base_context_checksum, self.global_seqno, separators,
                                  previous)
        if found is None:
            return None
        keys, trailers, values, _, types, order = found
        if not types <= SUPPORTED_VALUE_TYPES:
            return None
        return (keys, trailers, values), (types if types != _VALUES_ONLY else _VALUES_ONLY), order

    def _run(self, handles: list[BlockHandle], simple: bool
             ) -> tuple[DataBlock, list[int], frozenset[int], bool]:
        """A run of data blocks read and decoded in Python, and whether it was simple."""
        wheres = [self._data_where(h.offset) for h in handles]
        blocks = [self.read_block(h, "data") for h in handles]
        run = decode_data_blocks(blocks, wheres, self.global_seqno) if simple else None
        if run is not None:
            return (*run, True)
        decoded = [decode_data_block(b, w, self.global_seqno)
                   for b, w in zip(blocks, wheres, strict=True)]
        starts = []
        keys: list[bytes] = []
        trailers: list[int] = []
        values: list[bytes] = []
        for block in decoded:
            starts.append(len(keys))
            keys += block[0]
            trailers += block[1]
            values += block[2]
        return (keys, trailers, values), starts, _types(trailers), False

    def entries(self, start: bytes | None = None,
                end: bytes | None = None) -> Iterator[Entry]:
        """Every internal entry ``(user_key, sequence, value_type, value)``, in internal-key order.

        Only ``start <= user_key < end`` (unbounded when ``None``). Point entries only; range
        deletions are :meth:`range_tombstones`.
        """
        for keys, trailers, values in self.data_blocks(start, end):
            for key, trailer, value in zip(keys, trailers, values, strict=True):
                if start is not None and key < start:
                    continue
                if end is not None and key >= end:
                    return
                yield key, trailer >> 8, trailer & 0xFF, value

    def __iter__(self) -> Iterator[Entry]:
        return self.entries()

    def range_tombstones(self) -> list[RangeTombstone]:
        """The range deletions of the ``rocksdb.range_del`` meta block, in stored order.

        Each entry's key is the internal key ``(start, sequence, kTypeRangeDeletion)`` and its
        value the exclusive end user key.
        """
        if self._tombstones is not None:
            return list(self._tombstones)
        handle = self.meta_blocks.get(RANGE_DEL_BLOCK)
        if handle is None:
            self._tombstones = ()
            return []
        where = f"{self.name} (range deletion block at offset {handle.offset})"
        tombstones = []
        for key, value, _ in decode_meta_block(self.read_block(handle, "range deletion"), where):
            if len(key) < 8:
                raise corrupt(where, f"internal key of {len(key)} bytes is shorter than 8")
            trailer = U64.unpack_from(key, len(key) - 8)[0]
            if trailer & 0xFF != ValueType.RANGE_DELETION:
                raise corrupt(where, f"entry of value type {trailer & 0xFF} in the range "
                                     f"deletion block")
            sequence = self.global_seqno or trailer >> 8
            tombstones.append(RangeTombstone(key[:-8], value, sequence))
        self._tombstones = tuple(tombstones)  # read once: lookups ask for them every time
        return tombstones


def _types(trailers: list[int]) -> frozenset[int]:
    """The value types of entries with these trailers."""
    if trailers and trailers.count(trailers[0]) == len(trailers):
        # one trailer for all: a bottommost table's entries, their sequence numbers zeroed
        return frozenset({trailers[0] & 0xFF})
    return frozenset({t & 0xFF for t in trailers})


def _check_types(types: frozenset[int], where: str) -> None:
    """Refuse the value types a data block must not hold or this reader cannot interpret."""
    for value_type in sorted(types):
        if value_type in SUPPORTED_VALUE_TYPES:
            continue
        if value_type in UNSUPPORTED_VALUE_TYPES:
            raise UnsupportedFormatError(f"{where}: entries of value type "
                                         f"{UNSUPPORTED_VALUE_TYPES[value_type]} are not "
                                         f"supported")
        raise corrupt(where, f"entry of value type 0x{value_type:02x} in a data block")
