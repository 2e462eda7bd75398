"""formats: checkpoints on disk and the operations over them (depends on statecore, pyarrow).

The rooms, so that a concept is found by its file name:

* the model every reader produces and every operation consumes: :mod:`formats.model`
  (``Checkpoint``, the format-neutral opened checkpoint), :mod:`formats.open`
  (``open_checkpoint``: detects statectl's or Flink's format), :mod:`formats.columns` and
  :mod:`formats.arrow_types` (state types as Arrow columns);
* codecs, one folder per format family: :mod:`formats.statectl` (statectl's format v1:
  reader, writer, publish, asynchronous writer, state directories and their claims),
  :mod:`formats.flink` (Flink's heap, canonical and RocksDB snapshots: reader, serializers,
  the savepoint writer; :mod:`formats.flink.rocksdb` reads SST files);
* operations, at this level, each over the model: ``build`` (with ``fold`` and ``inputs``),
  ``rescale``, ``convert``, ``verify``, ``diff``, ``export``, ``inspect`` (with ``sources``:
  what a job's sources have read), ``state_scan``, ``key_group_stats``, ``row_sizes``,
  ``key_hash``; :mod:`formats.engines` chooses where they run (this process or Spark);
* storage: :mod:`formats.filesystems` (any pyarrow filesystem, URIs), :mod:`formats.commit`
  (the commit protocol), :mod:`formats.conditional` (create-only and compare-and-swap
  writes), :mod:`formats.owners` (which process holds what), :mod:`formats.io_stats`
  (counting the bytes a read costs);
* :mod:`formats.spark`: the Spark engine's jobs (``--engine spark``).
"""
