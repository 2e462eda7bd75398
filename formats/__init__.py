"""formats: checkpoints on disk and the operations over them (depends on statecore, pyarrow).

The rooms, so that a concept is found by its file name, from the bottom layer up (an import
points only down or sideways within a room; ``tests/test_house.py`` checks):

* :mod:`formats.model` -- the opened checkpoint every reader produces and every operation
  consumes (``Checkpoint``, columns, Arrow types, key hashing, source progress);
  :mod:`formats.storage` -- where bytes live and how writers agree (filesystems, the commit
  protocol, conditional writes, owners, I/O counting). Neither imports the other.
* the codecs, one room per format family, each over model and storage:
  :mod:`formats.statectl` (statectl's format v1: reader, writer, publish, asynchronous writer,
  state directories and their claims), :mod:`formats.flink` (Flink's snapshots: ``java``
  streams, ``types``, ``read`` and its mirror ``write``), :mod:`formats.inputs` (build's input
  files and bad records).
* :mod:`formats.open` -- ``open_checkpoint``: any snapshot's format detected, opened as the model.
* :mod:`formats.ops` -- the operations behind the commands, one module each (``inspect``,
  ``export``, ``query``, ``history``, ``verify``, ``diff``, ``rescale``, ``convert``,
  ``build``, ``snapshot_list``, ...).
* :mod:`formats.spark` -- the operations as Spark jobs (``--engine spark``), and
  :mod:`formats.engines` -- where a command's data work runs (this process or Spark).
"""
