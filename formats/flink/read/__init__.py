"""Reading Flink snapshots: ``_metadata``, the keyed and operator state streams, RocksDB.

:mod:`~formats.flink.read.metadata` parses ``_metadata`` (checked byte by byte by
:mod:`~formats.flink.read.metadata_check`, its checkpoint properties by
:mod:`~formats.flink.read.checkpoint_properties`); :mod:`~formats.flink.read.streams` finds and
reads the state streams; :mod:`~formats.flink.read.state_meta` a keyed stream's header;
:mod:`~formats.flink.read.keyed` (heap and canonical formats),
:mod:`~formats.flink.read.incremental` (RocksDB, over :mod:`formats.flink.read.rocksdb`'s SST
reader) and :mod:`~formats.flink.read.operator` decode the streams, with
:mod:`~formats.flink.read.pairs` (canonical key/value pairs) and
:mod:`~formats.flink.read.losses` (what could not be decoded, counted);
:mod:`~formats.flink.read.pieces` splits a snapshot by key-group range;
:mod:`~formats.flink.read.tables` turns decoded state into the model's Arrow columns and
:mod:`~formats.flink.read.snapshot_model` into the model's operators and states;
:mod:`~formats.flink.read.sources` decodes source splits; :mod:`~formats.flink.read.pickled`
PyFlink's pickled values (only when allowed).

May import: :mod:`statecore`, the model, storage, :mod:`formats.flink.java`,
:mod:`formats.flink.types`. Never :mod:`formats.flink.write` (``tests/test_house.py`` checks).
"""
