"""The operations behind the commands, one module per operation, each over the model.

``statectl inspect``: :mod:`~formats.ops.inspect` (with :mod:`~formats.ops.state_scan`, the
views that read state; :mod:`~formats.ops.key_group_stats`; :mod:`~formats.ops.row_sizes`;
:mod:`~formats.ops.ttl_given`, TTLs the user gives); ``export``: :mod:`~formats.ops.export`;
``query``: :mod:`~formats.ops.query` (with :mod:`~formats.ops.query_values`); ``history``:
:mod:`~formats.ops.history`; ``verify``: :mod:`~formats.ops.verify`; ``diff``:
:mod:`~formats.ops.diff`; ``rescale``: :mod:`~formats.ops.rescale`; ``convert``:
:mod:`~formats.ops.convert`; ``build``: :mod:`~formats.ops.build` (with
:mod:`~formats.ops.fold`); ``snapshot list``: :mod:`~formats.ops.snapshot_list`.

May import: :mod:`statecore`, the model, storage, :mod:`formats.open` and the codecs' public
writers (``formats.statectl``, ``formats.flink.write.bootstrap``, ``formats.inputs``) — never a
Flink reader's internals (they read through the model), :mod:`formats.spark`,
:mod:`formats.engines` or the CLI (``tests/test_house.py`` checks).
"""
