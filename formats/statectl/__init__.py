"""statectl checkpoint format, version 1: typed Parquet files and ``_metadata.json``.

Layout (DESIGN "statectl checkpoint format, version 1")::

    <checkpoint dir>/_metadata.json                  written last; its presence means complete
    <checkpoint dir>/op-<i>/keyed/<s>/<subtask>.parquet      i, s: indexes; names live in the
    <checkpoint dir>/op-<i>/operator/<s>/<subtask>.parquet   metadata, so any uid/name is safe

Keyed files have the columns ``key_group`` (int32), ``key``, ``namespace`` (absent for the void
namespace), ``value`` and, with TTL, ``ttl_timestamp`` (int64 ms; ``list<int64>`` for list
state, ``map<K, int64>`` for map state, parallel to the values). Rows are grouped by key group
in ascending order; a row group never holds part of a key group together with another one, and
the metadata records per key group ``(first row, row count)``, so one key group is read from
its row groups only. Operator files have ``value`` (list states, in list order) or ``key`` and
``value`` (broadcast state). Every file's schema metadata carries the format version, state
name and kind.

Writing publishes atomically, ``_metadata.json`` last (:mod:`formats.storage.commit`): on the local
disk files go into a sibling ``<dir>.inprogress-<random>`` directory (fsynced),
``_metadata.json`` last (temp name, then rename), then the directory is renamed into place; on
an object store they go into the directory itself, claimed by a create-only ``_inprogress``
marker, and ``_metadata.json`` is one request after them. A crash leaves either no checkpoint
or a complete one, and an existing checkpoint is never overwritten. All IO goes through
``pyarrow.fs``: a local path or any URI pyarrow supports (:mod:`formats.storage.filesystems`).

Modules: :mod:`~formats.statectl.reader` opens a checkpoint (the model's
:class:`~formats.model.checkpoint.Checkpoint` over Parquet files), :mod:`~formats.statectl.writer`
writes one from state snapshots, :mod:`~formats.statectl.rows` turns map snapshots' entries into
columns, :mod:`~formats.statectl.publish` makes a staged checkpoint appear,
:mod:`~formats.statectl.async_writer` writes in the background while processing goes on, and
:mod:`~formats.statectl.storage` manages a state directory of numbered checkpoints and
savepoints, shared by processes through :mod:`~formats.statectl.claims`.
"""
