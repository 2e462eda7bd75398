"""Reading and writing real Apache Flink checkpoints and savepoints in pure Python (no JVM).

Rooms, bottom up (``tests/test_house.py`` checks the order):

* :mod:`formats.flink.java` -- Java's byte streams, read and written, and Java serialization;
* :mod:`formats.flink.types` -- serializer snapshots, the codec of every type (POJOs,
  ``java.time``, Kryo, SQL rows, CEP, ...) and the encoders that mirror them;
* :mod:`formats.flink.read` -- ``_metadata``, the keyed and operator state streams, RocksDB's
  SST files and incremental checkpoints, decoded into the model (what cannot be decoded is
  counted, never the end of reading);
* :mod:`formats.flink.write` -- its mirror: savepoints each release restores, ``_metadata``
  out, rewriting a snapshot rescaled, bootstrapping one from a statectl checkpoint;
* :mod:`formats.flink.checkpoint` -- ``FlinkCheckpoint``: a snapshot served as the model's
  :class:`~formats.model.checkpoint.Checkpoint` (``formats.open.open_checkpoint`` detects the
  format), written rescaled through the writer.
"""

__all__ = ["FLINK_METADATA_FILE"]

#: The metadata file of a Flink checkpoint or savepoint (here, so that ``formats.open`` can tell
#: a Flink snapshot without importing its reader).
FLINK_METADATA_FILE = "_metadata"
