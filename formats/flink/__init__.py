"""Reading real Apache Flink checkpoints and savepoints in pure Python (no JVM).

:mod:`~formats.flink.metadata` parses ``_metadata``, :mod:`~formats.flink.keyed` and
:mod:`~formats.flink.operator` decode the state streams, :mod:`~formats.flink.serializers` the
serializer snapshots and values, and :mod:`~formats.flink.checkpoint` maps it all onto
statectl's checkpoint model (``formats.checkpoint_v1.open_checkpoint`` detects the format).
"""
