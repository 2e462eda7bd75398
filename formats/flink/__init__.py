"""Reading real Apache Flink checkpoints and savepoints in pure Python (no JVM).

:mod:`~formats.flink.metadata` parses ``_metadata``, :mod:`~formats.flink.keyed` and
:mod:`~formats.flink.operator` decode the state streams, :mod:`~formats.flink.types.codecs` the
serializer snapshots (and builds each serializer's :class:`~formats.flink.types.codec.Codec`),
:mod:`~formats.flink.types.temporal` the values of the types real jobs keep (POJOs, enums,
``java.time``, big numbers, arrays, Kryo), :mod:`~formats.flink.sources` what a job's sources
have read, and :mod:`~formats.flink.checkpoint` maps it all onto the model's
:class:`formats.model.Checkpoint` (``formats.open.open_checkpoint`` detects the format).
RocksDB snapshots and the savepoint writer join them in this package.
"""
