"""Opening one input file as Arrow record batches: Parquet, CSV or JSON Lines, with pyarrow.

The pieces :mod:`formats.inputs` is built from: the kind of a file (by its extension), a
stream of its batches (:func:`open_reader`) or the whole file (:func:`read_whole`), with the
column types of a schema learnt before, without some of its lines
(:class:`~formats.inputs.bad_records.LinesLeftOut`), and with one column read as text whatever its
values (``text``): a CSV column through the reader's column types (the text of each field as
written); a JSON Lines key through :class:`~formats.inputs.json_text.NumbersAsText` (a
number's JSON text as written). Errors of pyarrow and of storage become
:class:`InputError` and :class:`~statecore.errors.StorageError` (:func:`input_errors`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from formats.inputs.bad_records import LinesLeftOut
from formats.inputs.json_text import NumbersAsText
from formats.storage.filesystems import redact, resolve_filesystem, storage_errors
from statecore.errors import InvalidArgumentError, StatectlError

__all__ = ["INVALID_TEXT", "MEMORY_POOL", "NUMBER_LIKE", "PARSE_ERROR", "TYPE_CHANGED",
           "InputError", "Reader",
           "chunks", "column_spec", "first_missing_key", "input_errors", "is_text", "kind_of",
           "open_reader", "read_input", "read_whole"]

#: Where input batches (and the folding of runs, :mod:`formats.ops.fold`) allocate: the system
#: allocator. pyarrow's default pool (mimalloc) keeps the segments a stream of batches frees
#: for reuse, about 40 MB more for a build at its peak (measured: 1M records, peak RSS 250
#: against 220 B/entry); a build's Arrow buffers are few and large, so nothing is slower.
MEMORY_POOL = pa.system_memory_pool()
#: Rows per batch read from a Parquet file.
_PARQUET_BATCH_ROWS = 1 << 16

_SPECS = {pa.int8(): "int8", pa.int16(): "int16", pa.int32(): "int32", pa.int64(): "int64",
          pa.float32(): "float32", pa.float64(): "float64", pa.bool_(): "bool",
          pa.string(): "string", pa.large_string(): "string", pa.binary(): "bytes",
          pa.large_binary(): "bytes"}

#: pyarrow's JSON reader refusing a column of two types (its row 0-based, its column a pointer)
TYPE_CHANGED = re.compile(r"Column\((?P<column>[^)]*)\) changed from (?P<old>\w+) to "
                          r"(?P<new>\w+) in row (?P<row>\d+)")
#: pyarrow's readers refusing a malformed record (a CSV row of another number of fields, a
#: JSON Lines line that is no JSON object)
PARSE_ERROR = re.compile(r"(CSV|JSON) parse error|Empty (CSV|JSON) file")
#: pyarrow's CSV reader refusing bytes that are not UTF-8 in a column read as text
INVALID_TEXT = re.compile(r"invalid UTF8")
#: Text that Arrow's CSV reader would read as a number (its type inference)
NUMBER_LIKE = r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$"


class InputError(StatectlError):
    """An input file cannot be read as records."""


def column_spec(arrow_type: pa.DataType, column: str) -> str:
    """The statectl type spec of an input column."""
    spec = _SPECS.get(arrow_type)
    if spec is None:
        if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type):
            raise InvalidArgumentError(
                f"column {column!r} is {arrow_type}: cast it to an integer (e.g. epoch ms)")
        raise InvalidArgumentError(f"column {column!r} has type {arrow_type}, which build "
                                   "does not aggregate (numbers, bool, string, bytes)")
    return spec


def kind_of(path: str) -> str:
    """``"parquet"``, ``"csv"`` or ``"json"`` by the extension (before any URI query)."""
    lower = path.lower().split("?", 1)[0]
    if lower.endswith((".parquet", ".pq")):
        return "parquet"
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".jsonl", ".ndjson", ".json")):
        return "json"
    raise InputError(f"{redact(path)}: unknown input format (use .parquet, .csv or .jsonl)")


def read_input(path: str) -> pa.Table:
    """An input file (a local path or a URI) as one Arrow table, by its extension.

    Parquet, CSV or JSON Lines, as it is (no record checked or left out):
    :class:`~formats.inputs.FileSource` streams a file and checks its records instead.
    """
    return read_whole(path)


def _wrapped(stream: Any, kind: str, left_out: Sequence[int], text: str | None) -> Any:
    """``stream`` without the lines ``left_out``, a JSON key's numbers as their text."""
    if left_out:
        stream = LinesLeftOut(stream, left_out)
    if kind == "json" and text is not None:
        stream = NumbersAsText(stream, text)
    return stream


def read_whole(path: str, left_out: Sequence[int] = (), text: str | None = None) -> pa.Table:
    """:func:`read_input`, a CSV or JSON Lines file without its lines ``left_out``.

    ``text``: a column read as text, whatever its values (see the module doc).
    """
    kind = kind_of(path)
    fs, located = resolve_filesystem(path)
    with input_errors(path):
        if kind == "parquet":
            return pq.read_table(located, filesystem=fs)
        with fs.open_input_stream(located) as opened:
            stream = _wrapped(opened, kind, left_out, text)
            if kind == "csv":
                return pacsv.read_csv(stream, convert_options=_as_text(text))
            return pajson.read_json(stream)


def _as_text(column: str | None) -> pacsv.ConvertOptions | None:
    return None if column is None else pacsv.ConvertOptions(column_types={column: pa.string()})


class Reader:
    """An open stream of record batches and its schema; closes the file when done."""

    def __init__(self, schema: pa.Schema, batches: Iterator[pa.RecordBatch], owner: Any,
                 path: str) -> None:
        self.schema = schema
        self._batches, self._owner, self._path = batches, owner, path

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            while True:
                with input_errors(self._path):
                    batch = next(self._batches, None)
                if batch is None:
                    return
                yield batch
        finally:
            self.close()

    def close(self) -> None:
        self._owner.close()


@contextmanager
def input_errors(path: str) -> Iterator[None]:
    """Storage errors as :class:`StorageError`; Arrow's (a malformed file): :class:`InputError`."""
    try:
        with storage_errors("reading input", path):
            yield
    except (pa.ArrowException, OSError) as exc:
        changed = TYPE_CHANGED.search(str(exc))
        if changed:  # Arrow's JSON reader: its row is 0-based, its column a JSON pointer
            row = int(changed["row"])
            raise InputError(
                f"{redact(path)}: row {row + 1} (line {row + 1}), column "
                f"{changed['column'].lstrip('/')!r}: a {changed['new']} where the rows before "
                f"have a {changed['old']}; every record needs one type per column") from exc
        raise InputError(f"cannot read {redact(path)}: {exc}") from exc


def open_reader(path: str, schema: pa.Schema | None, first_row: int = 0,
                left_out: Sequence[int] = (), text: str | None = None) -> tuple[int, Reader]:
    """``(row of the first batch, reader)`` of ``path`` with the column types of ``schema``.

    ``schema`` None: types inferred from the first block. ``text``: a column read as text
    (see the module doc). A Parquet file starts at the row group that holds ``first_row``;
    other files at their first row, without their lines ``left_out`` (0-based, ascending;
    :class:`~formats.inputs.bad_records.LinesLeftOut`).
    """
    kind = kind_of(path)
    fs, located = resolve_filesystem(path)
    with input_errors(path):
        if kind == "parquet":
            parquet = pq.ParquetFile(located, filesystem=fs)
            try:
                start, groups = 0, list[int]()
                for index in range(parquet.metadata.num_row_groups):
                    rows = parquet.metadata.row_group(index).num_rows
                    if not groups and start + rows <= first_row:
                        start += rows
                    else:
                        groups.append(index)
                batches = parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, row_groups=groups,
                                               use_threads=False)
                return start, Reader(parquet.schema_arrow, batches, parquet, path)
            except BaseException:
                parquet.close()
                raise
        stream: Any = fs.open_input_stream(located)
        try:
            stream = _wrapped(stream, kind, left_out, text)
            if kind == "csv":
                reader = pacsv.open_csv(
                    stream, memory_pool=MEMORY_POOL,
                    convert_options=(_as_text(text) if schema is None
                                     else pacsv.ConvertOptions(column_types=schema)))
            else:
                reader = pajson.open_json(
                    stream, memory_pool=MEMORY_POOL, parse_options=(
                    None if schema is None else pajson.ParseOptions(explicit_schema=schema)))
            return 0, Reader(reader.schema, iter(reader), stream, path)
        except BaseException:
            stream.close()
            raise


def is_text(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))


def first_missing_key(column: pa.Array) -> int:
    """The index of the first null (or, for text, empty) value of ``column``, else -1.

    Arrow's kernels without Python scalars (a scalar argument makes pyarrow import pandas,
    which a build never needs); the index is looked for only when there is one.
    """
    empty = is_text(column.type) and pc.min(pc.utf8_length(column)).as_py() == 0
    if not column.null_count and not empty:
        return -1
    values = column.to_pylist()
    return next(i for i, v in enumerate(values) if v is None or (empty and v == ""))


def chunks(column: pa.ChunkedArray) -> Iterator[tuple[pa.Array, int]]:
    """The chunks of ``column`` with the offset of each."""
    offset = 0
    for chunk in column.chunks:
        yield chunk, offset
        offset += len(chunk)
