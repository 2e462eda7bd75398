"""Reading and writing real Apache Flink checkpoints and savepoints in pure Python (no JVM).

:mod:`~formats.flink.metadata` parses ``_metadata``; :mod:`~formats.flink.state_meta` a keyed
stream's header (key serializer, states' meta infos); :mod:`~formats.flink.keyed`,
:mod:`~formats.flink.incremental` (RocksDB) and :mod:`~formats.flink.operator` decode the
state streams, counting what they cannot decode in :mod:`~formats.flink.losses`; the types
room :mod:`formats.flink.types` holds the serializer snapshots, the codecs of every type
(POJOs, ``java.time``, Kryo, ...) and the encoders that mirror them;
:mod:`~formats.flink.sources` says what a job's sources have read;
:mod:`~formats.flink.snapshot_model` assembles the model and :mod:`~formats.flink.checkpoint`
serves it as a :class:`formats.model.Checkpoint` (``formats.open.open_checkpoint`` detects the
format). The savepoint writer (:mod:`~formats.flink.savepoint_writer`,
:mod:`~formats.flink.rewrite`, :mod:`~formats.flink.bootstrap`) writes what Flink restores.
"""
