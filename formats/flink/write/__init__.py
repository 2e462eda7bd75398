"""Writing Flink savepoints that each release restores: the mirror of :mod:`formats.flink.read`.

:mod:`~formats.flink.write.savepoint_writer` writes a canonical savepoint (its ``_metadata``
by :mod:`~formats.flink.write.metadata_out`, its serializer snapshots and state meta infos by
:mod:`~formats.flink.write.snapshot_out`) for the release :mod:`~formats.flink.write.versions`
chooses; :mod:`~formats.flink.write.rewrite` rewrites a Flink snapshot (rescaled, re-hashed,
backend-neutral); :mod:`~formats.flink.write.bootstrap` writes any statectl checkpoint as a
Flink savepoint (``convert``).

May import: :mod:`statecore`, the model, storage, :mod:`formats.flink.java`,
:mod:`formats.flink.types` and :mod:`formats.flink.read` (a rewrite reads what it writes)
(``tests/test_house.py`` checks).
"""
