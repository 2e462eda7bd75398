"""The properties block of a table (port of ``ParsePropertiesBlock``, ``table/meta_blocks.cc``).

The properties block is a meta block (keys and values as stored, restart interval 1, never
compressed) named ``rocksdb.properties`` in the metaindex. Its keys are strictly increasing
property names (``TablePropertiesNames``, ``table/table_properties.cc``). The predefined integer
properties (``rocksdb.num.entries``, ``rocksdb.format.version``, ``rocksdb.column.family.id``,
``rocksdb.index.key.is.user.key``, ...) are varint64s; the predefined string properties
(``rocksdb.column.family.name``, ``rocksdb.comparator``, ``rocksdb.merge.operator``,
``rocksdb.compression``, ...) are raw bytes; everything else is a user-collected property, kept
raw. The block-based table factory adds ``rocksdb.block.based.table.index.type``, a
``uint32LE`` ``IndexType`` (0 binary search, 1 hash search, 2 two-level, 3 binary search with
first key); SST files written by ``SstFileWriter`` add ``rocksdb.external_sst_file.version``
(``uint32LE``) and ``rocksdb.external_sst_file.global_seqno`` (``uint64LE``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from formats.flink.read.rocksdb.coding import U32, U64, corrupt, get_varint64
from statecore.errors import CorruptCheckpointError

__all__ = [
    "GLOBAL_SEQNO_PROPERTY",
    "INDEX_TYPE_PROPERTY",
    "IndexType",
    "TableProperties",
    "parse_properties",
]

INDEX_TYPE_PROPERTY = "rocksdb.block.based.table.index.type"
EXTERNAL_VERSION_PROPERTY = "rocksdb.external_sst_file.version"
GLOBAL_SEQNO_PROPERTY = "rocksdb.external_sst_file.global_seqno"


class IndexType:
    """``BlockBasedTableOptions::IndexType``."""

    BINARY_SEARCH = 0
    HASH_SEARCH = 1
    TWO_LEVEL_INDEX_SEARCH = 2
    BINARY_SEARCH_WITH_FIRST_KEY = 3


#: Predefined properties stored as varint64, by name -> attribute of TableProperties.
_INT_PROPERTIES = {
    "rocksdb.num.entries": "num_entries",
    "rocksdb.num.data.blocks": "num_data_blocks",
    "rocksdb.num.range-deletions": "num_range_deletions",
    "rocksdb.deleted.keys": "num_deletions",
    "rocksdb.merge.operands": "num_merge_operands",
    "rocksdb.data.size": "data_size",
    "rocksdb.index.size": "index_size",
    "rocksdb.index.partitions": "index_partitions",
    "rocksdb.index.key.is.user.key": "index_key_is_user_key",
    "rocksdb.index.value.is.delta.encoded": "index_value_is_delta_encoded",
    "rocksdb.raw.key.size": "raw_key_size",
    "rocksdb.raw.value.size": "raw_value_size",
    "rocksdb.format.version": "format_version",
    "rocksdb.column.family.id": "column_family_id",
    "rocksdb.creation.time": "creation_time",
    "rocksdb.file.creation.time": "file_creation_time",
    "rocksdb.user.defined.timestamps.persisted": "user_defined_timestamps_persisted",
    "rocksdb.separate.key.value.in.data.block": "separate_key_value_in_data_block",
    "rocksdb.key.largest.seqno": "key_largest_seqno",
    "rocksdb.key.smallest.seqno": "key_smallest_seqno",
}
#: Predefined properties stored as raw strings.
_STR_PROPERTIES = {
    "rocksdb.column.family.name": "column_family_name",
    "rocksdb.comparator": "comparator_name",
    "rocksdb.merge.operator": "merge_operator_name",
    "rocksdb.compression": "compression_name",
    "rocksdb.prefix.extractor.name": "prefix_extractor_name",
    "rocksdb.filter.policy": "filter_policy_name",
}


@dataclass
class TableProperties:
    """``rocksdb::TableProperties``: the fields a reader needs, plus every property raw.

    Integer fields are ``None`` when the file does not record them (older writers); string
    fields are decoded as UTF-8 with replacement (they are names RocksDB writes).
    ``raw`` maps every property name to its stored bytes.
    """

    num_entries: int | None = None
    num_data_blocks: int | None = None
    num_range_deletions: int | None = None
    num_deletions: int | None = None
    num_merge_operands: int | None = None
    data_size: int | None = None
    index_size: int | None = None
    index_partitions: int | None = None
    index_key_is_user_key: int | None = None
    index_value_is_delta_encoded: int | None = None
    raw_key_size: int | None = None
    raw_value_size: int | None = None
    format_version: int | None = None
    column_family_id: int | None = None
    creation_time: int | None = None
    file_creation_time: int | None = None
    user_defined_timestamps_persisted: int | None = None
    separate_key_value_in_data_block: int | None = None
    key_largest_seqno: int | None = None
    key_smallest_seqno: int | None = None
    column_family_name: str | None = None
    comparator_name: str | None = None
    merge_operator_name: str | None = None
    compression_name: str | None = None
    prefix_extractor_name: str | None = None
    filter_policy_name: str | None = None
    index_type: int = IndexType.BINARY_SEARCH
    external_sst_file_version: int | None = None
    #: The stored ``global_seqno`` and the offset of its 8 bytes in the file (``None``: absent).
    global_seqno: int | None = None
    global_seqno_offset: int | None = None
    raw: dict[str, bytes] = field(default_factory=dict)


def parse_properties(entries: list[tuple[bytes, bytes, int]], where: str) -> TableProperties:
    """Decode the properties block's ``(name, value, value offset in the file)`` entries."""
    props = TableProperties()
    last: bytes | None = None
    for key, value, value_offset in entries:
        if last is not None and key <= last:
            raise corrupt(where, "properties block keys are not strictly increasing")
        last = key
        name = key.decode("utf-8", "replace")
        props.raw[name] = value
        if name in _INT_PROPERTIES:
            # RocksDB skips a malformed value with a log line; so does this reader.
            try:
                number, _ = get_varint64(value, 0, len(value), where)
            except CorruptCheckpointError:
                continue
            setattr(props, _INT_PROPERTIES[name], number)
        elif name in _STR_PROPERTIES:
            setattr(props, _STR_PROPERTIES[name], value.decode("utf-8", "replace"))
        elif name == INDEX_TYPE_PROPERTY:
            if len(value) != 4:
                raise corrupt(where, f"property {name} is {len(value)} bytes, not 4")
            props.index_type = U32.unpack(value)[0]
        elif name == EXTERNAL_VERSION_PROPERTY:
            if len(value) != 4:
                raise corrupt(where, f"property {name} is {len(value)} bytes, not 4")
            props.external_sst_file_version = U32.unpack(value)[0]
        elif name == GLOBAL_SEQNO_PROPERTY:
            if len(value) != 8:
                raise corrupt(where, f"property {name} is {len(value)} bytes, not 8")
            props.global_seqno = U64.unpack(value)[0]
            props.global_seqno_offset = value_offset
    return props
