"""Input records for ``statectl build``: Parquet, CSV and JSON Lines files, read with pyarrow.

A :class:`FileSource` is a replayable source (``statecore.job.Source``): each input file is a
split and a position is a row number, so a resumed build reads every file from the row its
checkpoint recorded. Column types come from the files' Arrow schema and map to statectl type
specs (int8..int64, float32/float64, bool, string, bytes); every file must have the same ones.

Inputs are streamed, never held whole: memory stays bounded by a run of records (what
:meth:`FileSource.rows` is asked for) and the reader's blocks, whatever the size of the files.

* Parquet files give their schema and row count from their footer; a read starts at the row
  group holding its first row.
* CSV and JSON Lines files are read once when the source is opened, as a stream, to learn
  their schema and count their rows, then streamed again as records are read, with the
  column types fixed to that schema. The types are those pyarrow's whole-file readers
  (``read_csv``, ``read_json``) infer: a streaming reader infers them from the first block
  only, so when a later block does not convert to them (a column of integers that turns to
  decimals or text further down), the file is read whole once to infer them over every row
  (memory for that file's table, while the source is opened).

What would give silent wrong results (text that is not UTF-8, a null, empty or missing key, a
column of two types, a key of no ``--key-type`` value, a record the reader cannot parse:
:mod:`formats.inputs.bad_records`) is refused by default, naming the file, row (and line) and
column. With ``on_bad_record`` ``skip`` or ``fail`` such records are found instead: a CSV or JSON
Lines
file is then read without them (its column types are the ones of the other records), and
:meth:`FileSource.read` yields a ``SkippedRecord`` where one was, so positions still count
every record of a file.

Modules: :mod:`~formats.inputs.reading` (opening a file as batches),
:mod:`~formats.inputs.checks` (the checks of CSV and JSON Lines records),
:mod:`~formats.inputs.parquet` (those of Parquet keys), :mod:`~formats.inputs.keys`
(``--key-type`` conversions), :mod:`~formats.inputs.json_text` (JSON numbers as their text),
:mod:`~formats.inputs.lenient` (learning a file, refusing or finding its bad records),
:mod:`~formats.inputs.source` (:class:`FileSource`).
"""

from formats.inputs.reading import MEMORY_POOL, InputError, column_spec, read_input
from formats.inputs.source import READ_ROWS, FileSource

__all__ = ["MEMORY_POOL", "READ_ROWS", "FileSource", "InputError", "column_spec", "read_input"]
