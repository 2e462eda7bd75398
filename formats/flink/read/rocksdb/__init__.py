"""Reading RocksDB's files in pure Python: block-based tables (SST files) and the MANIFEST.

Flink's embedded RocksDB state backend keeps its state in RocksDB; an incremental checkpoint or a
native savepoint is RocksDB's own files. This package reads them without RocksDB:

* :mod:`.sst` opens one block-based table (footer, metaindex, properties, index, data blocks)
  from its bytes: :func:`open_sst` -> :class:`SstFile`, whose entries are internal entries
  ``(user_key, sequence, value_type, value)``;
* :mod:`.merge` gives the live view of one column family over many tables
  (:func:`live_items`, :func:`live_range`): newest version wins, deletions and range deletions
  hide older versions, merge operands are joined as Flink's ``StringAppendTESTOperator`` does;
* :mod:`.manifest` replays a MANIFEST into the live files per column family and level.

Lower layers: :mod:`.coding` (varints), :mod:`.checksums`, :mod:`.compression`, :mod:`.footer`,
:mod:`.block`, :mod:`.properties`, :mod:`.dbformat`. Every file is untrusted: malformed input
raises :class:`~statecore.errors.CorruptCheckpointError` and features this reader does not
support raise :class:`~statecore.errors.UnsupportedFormatError`, each naming the file.
"""

from formats.flink.read.rocksdb.dbformat import ValueType
from formats.flink.read.rocksdb.footer import has_block_based_magic
from formats.flink.read.rocksdb.merge import live_items, live_range
from formats.flink.read.rocksdb.properties import TableProperties
from formats.flink.read.rocksdb.sst import RangeTombstone, SstFile, open_sst

__all__ = [
    "RangeTombstone",
    "SstFile",
    "TableProperties",
    "ValueType",
    "has_block_based_magic",
    "live_items",
    "live_range",
    "open_sst",
]
