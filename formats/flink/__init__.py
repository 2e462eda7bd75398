"""Reading real Apache Flink checkpoints and savepoints in pure Python (no JVM).

:mod:`~formats.flink.metadata` parses ``_metadata``, :mod:`~formats.flink.keyed` and
:mod:`~formats.flink.operator` decode the state streams, :mod:`~formats.flink.serializers` the
serializer snapshots and values, and :mod:`~formats.flink.checkpoint` maps it all onto
the model's :class:`formats.model.Checkpoint` (``formats.open.open_checkpoint`` detects the
format). RocksDB snapshots and the savepoint writer join them in this package.
"""
