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

from formats.filesystems import redact, resolve_filesystem, storage_errors
from statecore.errors import InvalidArgumentError, StatectlError

__all__ = ["MEMORY_POOL", "READ_ROWS", "FileSource", "InputError", "column_spec", "read_input"]

#: Where input batches (and the folding of runs, :mod:`formats.fold`) allocate: the system
#: allocator. pyarrow's default pool (mimalloc) keeps the segments a stream of batches frees
#: for reuse, about 40 MB more for a build at its peak (measured: 1M records, peak RSS 250
#: against 220 B/entry); a build's Arrow buffers are few and large, so nothing is slower.
MEMORY_POOL = pa.system_memory_pool()
#: Rows turned into Python records at a time by :meth:`FileSource.read`.
READ_ROWS = 4096
#: Rows per batch read from a Parquet file.
_PARQUET_BATCH_ROWS = 1 << 16

_SPECS = {pa.int8(): "int8", pa.int16(): "int16", pa.int32(): "int32", pa.int64(): "int64",
          pa.float32(): "float32", pa.float64(): "float64", pa.bool_(): "bool",
          pa.string(): "string", pa.large_string(): "string", pa.binary(): "bytes",
          pa.large_binary(): "bytes"}


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


def _kind(path: str) -> str:
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

    Parquet, CSV or JSON Lines. The whole file is read (the Spark engine's tasks read theirs
    this way); :class:`FileSource` streams instead.
    """
    kind = _kind(path)
    fs, located = resolve_filesystem(path)
    with _input_errors(path):
        if kind == "parquet":
            return pq.read_table(located, filesystem=fs)
        with fs.open_input_stream(located) as stream:
            if kind == "csv":
                return pacsv.read_csv(stream)
            return pajson.read_json(stream)


class _Reader:
    """An open stream of record batches and its schema; closes the file when done."""

    def __init__(self, schema: pa.Schema, batches: Iterator[pa.RecordBatch], owner: Any,
                 path: str) -> None:
        self.schema = schema
        self._batches, self._owner, self._path = batches, owner, path

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            while True:
                with _input_errors(self._path):
                    batch = next(self._batches, None)
                if batch is None:
                    return
                yield batch
        finally:
            self.close()

    def close(self) -> None:
        self._owner.close()


@contextmanager
def _input_errors(path: str) -> Iterator[None]:
    """Storage errors as :class:`StorageError`; Arrow's (a malformed file): :class:`InputError`."""
    try:
        with storage_errors("reading input", path):
            yield
    except (pa.ArrowException, OSError) as exc:
        changed = _TYPE_CHANGED.search(str(exc))
        if changed:  # Arrow's JSON reader: its row is 0-based, its column a JSON pointer
            row = int(changed["row"])
            raise InputError(
                f"{redact(path)}: row {row + 1} (line {row + 1}), column "
                f"{changed['column'].lstrip('/')!r}: a {changed['new']} where the rows before "
                f"have a {changed['old']}; every record needs one type per column") from exc
        raise InputError(f"cannot read {redact(path)}: {exc}") from exc


_TYPE_CHANGED = re.compile(r"Column\((?P<column>[^)]*)\) changed from (?P<old>\w+) to "
                           r"(?P<new>\w+) in row (?P<row>\d+)")
#: Text that Arrow's CSV reader would read as a number (its type inference)
_NUMBER_LIKE = r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$"


def _open(path: str, schema: pa.Schema | None, first_row: int = 0) -> tuple[int, _Reader]:
    """``(row of the first batch, reader)`` of ``path`` with the column types of ``schema``.

    ``schema`` None: types inferred from the first block. A Parquet file starts at the row
    group that holds ``first_row``; other files at their first row.
    """
    kind = _kind(path)
    fs, located = resolve_filesystem(path)
    with _input_errors(path):
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
                return start, _Reader(parquet.schema_arrow, batches, parquet, path)
            except BaseException:
                parquet.close()
                raise
        stream = fs.open_input_stream(located)
        try:
            if kind == "csv":
                reader = pacsv.open_csv(
                    stream, memory_pool=MEMORY_POOL,
                    convert_options=(None if schema is None
                                     else pacsv.ConvertOptions(column_types=schema)))
            else:
                reader = pajson.open_json(
                    stream, memory_pool=MEMORY_POOL, parse_options=(
                    None if schema is None else pajson.ParseOptions(explicit_schema=schema)))
            return 0, _Reader(reader.schema, iter(reader), stream, path)
        except BaseException:
            stream.close()
            raise


def _learn(path: str, key: str | None = None, typed_key: bool = False
           ) -> tuple[pa.Schema, int]:
    """The schema and row count of ``path`` (see the module doc for CSV and JSON Lines).

    What would silently give wrong results is refused, naming the file, row and column
    (:class:`InputError`): text that is not UTF-8 (pyarrow reads such a CSV column as bytes,
    which would change every key's type and key group; a JSON reader replaces the bytes with
    U+FFFD), and a record whose ``key`` is null or empty (missing in JSON Lines, an empty CSV
    field): Flink refuses a null key, and an empty one is no key a job means.
    """
    if _kind(path) == "parquet":
        fs, located = resolve_filesystem(path)
        with _input_errors(path), pq.ParquetFile(located, filesystem=fs) as parquet:
            if key is not None and key in parquet.schema_arrow.names:
                _check_parquet_key(path, parquet, key)
            return parquet.schema_arrow, parquet.metadata.num_rows
    check = _RecordCheck(path, key, typed_key)
    _, reader = _open(path, None)
    try:
        rows = 0
        for batch in reader:
            check.batch(batch, rows)
            rows += batch.num_rows
        MEMORY_POOL.release_unused()  # the reader's blocks: freed, but kept unless told
        schema = reader.schema
    except InputError:  # a later block's values do not convert to the first block's types
        reader.close()
        table = read_input(path)  # infers over every row; raises if the file is malformed
        check = _RecordCheck(path, key, typed_key)
        rows = 0
        for batch in table.to_batches():
            check.batch(batch, rows)
            rows += batch.num_rows
        schema = table.schema
        del table
        pa.default_memory_pool().release_unused()  # read_table's pool
    check.finish(schema)
    return schema, rows


class _RecordCheck:
    """The checks of :func:`_learn` over a CSV or JSON Lines file's batches, as they stream."""

    def __init__(self, path: str, key: str | None, typed_key: bool = False) -> None:
        self.path, self.key, self.kind = path, key, _kind(path)
        #: a JSON string column is not UTF-8, or holds U+FFFD (maybe a replaced invalid byte)
        self.replaced = False
        #: the key's type is given (``--key-type``), not inferred from the values
        self.typed_key = typed_key
        #: a CSV text key column's first number-like and first other value: (row, value)
        self.number_like: tuple[int, str] | None = None
        self.other: tuple[int, str] | None = None

    def where(self, row: int) -> str:
        """Row ``row`` (0-based) for people: 1-based, and its line in a CSV file."""
        line = f" (line {row + 2})" if self.kind == "csv" else f" (line {row + 1})"
        return f"{redact(self.path)}: row {row + 1}{line}"

    def batch(self, batch: pa.RecordBatch, first: int) -> None:
        """Check the rows ``first ..`` (0-based) of the file."""
        if self.key is not None and self.key in batch.schema.names:
            column = batch.column(self.key)
            index = _first_missing_key(column)
            if index >= 0:
                what = ("is empty or missing" if _is_text(column.type)
                        else "has no value (null)")
                raise InputError(
                    f"{self.where(first + index)}: the key column {self.key!r} {what}; every "
                    f"record needs a key (Flink refuses a null key)")
            if self.kind == "csv" and not self.typed_key and _is_text(column.type):
                self._mixed(column, first)
        if self.kind == "json" and not self.replaced:
            for field, column in zip(batch.schema, batch.columns, strict=True):
                if not pa.types.is_string(field.type):
                    continue
                try:  # the streaming reader keeps the bytes as they are: not UTF-8 at times
                    column.validate(full=True)
                except pa.ArrowInvalid:
                    self.replaced = True
                    break
                # the whole-file reader puts U+FFFD where the bytes were not UTF-8
                if pc.max(pc.find_substring(column, pattern="\ufffd")).as_py() not in (-1, None):
                    self.replaced = True

    def _mixed(self, column: pa.Array, first: int) -> None:
        """Note the first number-like and the first other key of a CSV text key column."""
        if self.number_like is not None and self.other is not None:
            return
        # kernels without Python scalars (a scalar argument makes pyarrow import pandas); the
        # column has no nulls (checked before)
        numeric = pc.match_substring_regex(column, _NUMBER_LIKE)
        for wanted, seen in ((True, self.number_like), (False, self.other)):
            if seen is not None:
                continue
            hits = pc.indices_nonzero(numeric if wanted else pc.invert(numeric))
            if not len(hits):
                continue
            index = hits[0].as_py()
            found = (first + index, str(column[index].as_py()))
            if wanted:
                self.number_like = found
            else:
                self.other = found

    def finish(self, schema: pa.Schema) -> None:
        """Columns that are not text: CSV bytes that are not UTF-8, JSON's replaced bytes.

        A CSV key column of numbers and other text: one record would change every key's type
        (and key group), so it is refused unless the key type is given.
        """
        if self.number_like is not None and self.other is not None:
            minority = max(self.number_like, self.other)  # the later one breaks the pattern
            kind = "a number" if minority is self.number_like else "no number"
            earlier = "no number" if minority is self.number_like else "numbers"
            raise InputError(
                f"{self.where(minority[0])}: the key column {self.key!r} holds {kind} "
                f"({minority[1]!r}) where row {min(self.number_like, self.other)[0] + 1} "
                f"holds {earlier}: one record would decide every key's type and key group; "
                f"give --key-type (string keys them all as text)")
        if self.kind == "csv":
            for field in schema:
                if pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
                    self._invalid_utf8(field.name)
        elif self.replaced:
            self._invalid_utf8(None)

    def _invalid_utf8(self, column: str | None) -> None:
        """Raise naming the first line that is not UTF-8 (and the column, for CSV)."""
        fs, located = resolve_filesystem(self.path)
        with _input_errors(self.path), fs.open_input_stream(located) as stream:
            number, pending = 0, b""
            while True:
                chunk = stream.read(1 << 20)
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop() if chunk else b""
                for line in lines:
                    number += 1
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        named = f", column {column!r}" if column is not None else ""
                        raise InputError(
                            f"{redact(self.path)}: line {number}{named}: not valid UTF-8 "
                            f"(byte 0x{line[exc.start]:02x} at character {exc.start + 1}); "
                            f"statectl reads text inputs as UTF-8") from None
                if not chunk:
                    break
        if column is not None:  # binary without a bad byte: cannot be, but never silent
            raise InputError(f"{redact(self.path)}: column {column!r} is not text")


def _is_text(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))


def _first_missing_key(column: pa.Array) -> int:
    """The index of the first null (or, for text, empty) value of ``column``, else -1.

    Arrow's kernels without Python scalars (a scalar argument makes pyarrow import pandas,
    which a build never needs); the index is looked for only when there is one.
    """
    empty = _is_text(column.type) and pc.min(pc.utf8_length(column)).as_py() == 0
    if not column.null_count and not empty:
        return -1
    values = column.to_pylist()
    return next(i for i, v in enumerate(values) if v is None or (empty and v == ""))


def _chunks(column: pa.ChunkedArray) -> Iterator[tuple[pa.Array, int]]:
    offset = 0
    for chunk in column.chunks:
        yield chunk, offset
        offset += len(chunk)


def _check_parquet_key(path: str, parquet: pq.ParquetFile, key: str) -> None:
    """Refuse a Parquet file's null or empty keys, naming the row.

    The row groups' statistics clear most; a row group they do not clear has its key column
    read to find the row.
    """
    field = parquet.schema_arrow.field(key)
    names = parquet.metadata.schema.names
    column_index = names.index(key) if key in names else -1
    text = _is_text(field.type)
    first = 0
    for group in range(parquet.metadata.num_row_groups):
        meta = parquet.metadata.row_group(group)
        stats = meta.column(column_index).statistics if column_index >= 0 else None
        cleared = (stats is not None and stats.has_null_count and stats.null_count == 0
                   and (not text or (stats.has_min_max and stats.min not in ("", b""))))
        if not cleared:
            column = parquet.read_row_group(group, columns=[key]).column(0)
            at = next((offset + found for chunk, offset in _chunks(column)
                       if (found := _first_missing_key(chunk)) >= 0), -1)
            if at >= 0:
                raise InputError(f"{redact(path)}: row {first + at + 1}: the key column "
                                 f"{key!r} is null or empty; every record needs a key (Flink "
                                 f"refuses a null key)")
        first += meta.num_rows


class _Cursor:
    """Rows of one file by position, streamed; holds the batches of the last rows taken.

    ``take`` is called with positions that mostly follow each other (the runs of a build;
    records one by one from the start of a run that could not be folded); a position before
    what is held opens the file again, one after it skips forward.
    """

    def __init__(self, path: str, schema: pa.Schema) -> None:
        self.path, self.schema = path, schema
        self._batches: list[pa.RecordBatch] = []
        self._start = self._end = 0  # rows [start, end) are in self._batches
        self._reader: _Reader | None = None
        self._batches_left: Iterator[pa.RecordBatch] = iter(())

    def take(self, position: int, count: int) -> pa.Table:
        """Rows ``position .. position + count - 1`` (fewer at the end of the file)."""
        if self._reader is None or position < self._start:
            self.close()
            self._start, self._reader = _open(self.path, self.schema, position)
            self._end, self._batches_left = self._start, iter(self._reader)
        while self._batches and self._start + self._batches[0].num_rows <= position:
            self._start += self._batches.pop(0).num_rows
        while self._end < position + count:
            batch = next(self._batches_left, None)
            if batch is None:
                break
            if not self._batches and self._end + batch.num_rows <= position:  # skip forward
                self._start = self._end = self._end + batch.num_rows
                continue
            self._batches.append(batch)
            self._end += batch.num_rows
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        return table.slice(max(0, position - self._start), count)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self._reader, self._batches, self._batches_left = None, [], iter(())
        self._start = self._end = 0


class FileSource:
    """Records of ``paths`` as dicts, file by file; positions are row numbers (streamed)."""

    def __init__(self, paths: Sequence[str], key: str | None = None,
                 typed_key: bool = False) -> None:
        """Learn every file's columns and rows, checking each record (:func:`_learn`).

        ``key``: the column records are keyed by; ``typed_key``: its type is given, not
        inferred.
        """
        if not paths:
            raise InvalidArgumentError("give at least one input file")
        self._paths = list(paths)
        self._rows: dict[str, int] = {}
        schemas: dict[str, pa.Schema] = {}
        for path in self._paths:
            schemas[path], self._rows[path] = _learn(path, key, typed_key)
        first = schemas[self._paths[0]]
        for path, schema in schemas.items():
            if not schema.equals(first):
                raise InputError(f"{path} has columns {schema.names} of other types than "
                                 f"{self._paths[0]}: every input needs the same columns")
        self.column_types = {f.name: column_spec(f.type, f.name) for f in first}
        self._cursors = {path: _Cursor(path, schemas[path]) for path in self._paths}

    def splits(self) -> Sequence[str]:
        return self._paths

    def count(self) -> int:
        return sum(self._rows.values())

    def rows(self, split: str, position: int, count: int) -> pa.Table:
        """Rows ``position .. position + count - 1`` of ``split`` (fewer at its end)."""
        if position > self._rows[split]:
            raise InputError(f"{split} has {self._rows[split]} rows; the checkpoint says "
                             f"{position} were read: was the input changed?")
        return self._cursors[split].take(position, count)

    def read(self, split: str, position: int) -> Iterator[tuple[int, Any]]:
        while True:
            table = self.rows(split, position, READ_ROWS)
            if not table.num_rows:
                return
            for record in table.to_pylist():
                position += 1
                yield position, record

    def close(self) -> None:
        """Close the files still open (reading again opens them again)."""
        for cursor in self._cursors.values():
            cursor.close()
