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
column of two types: :mod:`formats.bad_records`) is refused by default, naming the file, row
(and line) and column. With ``on_bad_record`` ``skip`` or ``fail`` such records are found
instead: a CSV or JSON Lines file is then read without them (its column types are the ones of
the other records), and :meth:`FileSource.read` yields a ``SkippedRecord`` where one was, so
positions still count every record of a file.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from formats.bad_records import (
    EMPTY_KEY,
    EXAMPLES,
    INVALID_UTF8,
    MISSING_KEY,
    MIXED_TYPE,
    ON_BAD_RECORD,
    REASONS,
    REFUSE,
    BadRecord,
    LineMap,
    LinesLeftOut,
    json_mixed_types,
    originals,
    scan_lines,
)
from formats.filesystems import redact, resolve_filesystem, storage_errors
from statecore.errors import InvalidArgumentError, StatectlError
from statecore.job import SkippedRecord

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
    return _read_whole(path)


def _read_whole(path: str, left_out: Sequence[int] = (), text: str | None = None) -> pa.Table:
    """:func:`read_input`, a CSV or JSON Lines file without its lines ``left_out``.

    ``text``: a CSV column read as text, whatever its values (see :func:`_lenient_pass`).
    """
    kind = _kind(path)
    fs, located = resolve_filesystem(path)
    with _input_errors(path):
        if kind == "parquet":
            return pq.read_table(located, filesystem=fs)
        with fs.open_input_stream(located) as opened:
            stream: Any = LinesLeftOut(opened, left_out) if left_out else opened
            if kind == "csv":
                return pacsv.read_csv(stream, convert_options=_as_text(text))
            return pajson.read_json(stream)


def _as_text(column: str | None) -> pacsv.ConvertOptions | None:
    return None if column is None else pacsv.ConvertOptions(column_types={column: pa.string()})


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


def _open(path: str, schema: pa.Schema | None, first_row: int = 0,
          left_out: Sequence[int] = (), text: str | None = None) -> tuple[int, _Reader]:
    """``(row of the first batch, reader)`` of ``path`` with the column types of ``schema``.

    ``schema`` None: types inferred from the first block (a CSV column ``text`` read as
    text). A Parquet file starts at the row group that holds ``first_row``; other files at
    their first row, without their lines ``left_out`` (0-based, ascending;
    :class:`~formats.bad_records.LinesLeftOut`).
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
        stream: Any = fs.open_input_stream(located)
        if left_out:
            stream = LinesLeftOut(stream, left_out)
        try:
            if kind == "csv":
                reader = pacsv.open_csv(
                    stream, memory_pool=MEMORY_POOL,
                    convert_options=(_as_text(text) if schema is None
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
        rows = _check_table(check, table)
        schema = table.schema
        del table
        pa.default_memory_pool().release_unused()  # read_table's pool
    check.finish(schema)
    return schema, rows


class _RecordCheck:
    """The checks of :func:`_learn` over a CSV or JSON Lines file's batches, as they stream.

    ``collect``: a key that is null, empty or of the other kind than the column's first (CSV)
    is noted in :attr:`bad` instead of refused (:func:`_learn_lenient`).
    """

    def __init__(self, path: str, key: str | None, typed_key: bool = False,
                 collect: bool = False) -> None:
        self.path, self.key, self.kind = path, key, _kind(path)
        #: a JSON string column is not UTF-8, or holds U+FFFD (maybe a replaced invalid byte)
        self.replaced = False
        #: the key's type is given (``--key-type``), not inferred from the values
        self.typed_key = typed_key
        #: a CSV text key column's first number-like and first other value: (row, value)
        self.number_like: tuple[int, str] | None = None
        self.other: tuple[int, str] | None = None
        self.collect = collect
        #: collect: the bad records found, ``(row, reason, column, detail)`` (0-based rows)
        self.bad: list[tuple[int, str, str | None, str]] = []
        #: collect: whether the CSV text key column's first key looks like a number
        self.first_number: bool | None = None

    def where(self, row: int) -> str:
        """Row ``row`` (0-based) for people: 1-based, and its line in a CSV file."""
        line = f" (line {row + 2})" if self.kind == "csv" else f" (line {row + 1})"
        return f"{redact(self.path)}: row {row + 1}{line}"

    def batch(self, batch: pa.RecordBatch, first: int) -> None:
        """Check the rows ``first ..`` (0-based) of the file."""
        if self.key is not None and self.key in batch.schema.names and self.collect:
            self.collect_keys(batch.column(self.key), first)
        elif self.key is not None and self.key in batch.schema.names:
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

    def collect_keys(self, column: pa.Array, first: int) -> None:
        """Note the keys that are null or empty, and (CSV) those of the other kind.

        ``column``: the key column of the rows ``first ..`` (0-based) of the file.
        """
        assert self.key is not None
        nulls = pc.is_null(column)
        text = _is_text(column.type)
        # kernels without Python scalars (see _mixed); empty: a text of length 0
        empty = pc.invert(pc.cast(pc.utf8_length(column), pa.bool_())) if text else None
        found = [(first + i, MISSING_KEY, self.key, f"the key column {self.key!r} has no "
                  f"value (null or absent)") for i in pc.indices_nonzero(nulls).to_pylist()]
        if empty is not None:
            found += [(first + i, EMPTY_KEY, self.key, f"the key column {self.key!r} is empty")
                      for i in pc.indices_nonzero(empty).to_pylist()]
        if self.kind == "csv" and not self.typed_key and empty is not None:
            numeric = pc.match_substring_regex(column, _NUMBER_LIKE)
            valid = pc.indices_nonzero(pc.invert(pc.or_kleene(nulls, empty))).to_pylist()
            if valid and self.first_number is None:
                self.first_number = bool(numeric[valid[0]].as_py())
            if self.first_number is not None:
                other = numeric if not self.first_number else pc.invert(numeric)
                kind = "no number" if self.first_number else "a number"
                was = "a number" if self.first_number else "no number"
                mixed = pc.indices_nonzero(pc.and_kleene(other, pc.invert(
                    pc.or_kleene(nulls, empty)))).to_pylist()
                found += [(first + i, MIXED_TYPE, self.key,
                           f"the key column {self.key!r} holds {kind} "
                           f"({column[i].as_py()!r}) where its first key holds {was}")
                          for i in mixed]
        self.bad.extend(sorted(found))

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


def _key_row_groups(parquet: pq.ParquetFile, key: str
                    ) -> Iterator[tuple[int, pa.ChunkedArray]]:
    """The key column of each row group its statistics do not clear of null or empty keys.

    Yields ``(first, column)``: ``first`` is the 0-based row of the file the group starts at.
    The statistics clear most row groups, which are then not read.
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
            yield first, parquet.read_row_group(group, columns=[key]).column(0)
        first += meta.num_rows


def _check_parquet_key(path: str, parquet: pq.ParquetFile, key: str) -> None:
    """Refuse a Parquet file's null or empty keys, naming the row (:func:`_key_row_groups`)."""
    for first, column in _key_row_groups(parquet, key):
        at = next((offset + found for chunk, offset in _chunks(column)
                   if (found := _first_missing_key(chunk)) >= 0), -1)
        if at >= 0:
            raise InputError(f"{redact(path)}: row {first + at + 1}: the key column "
                             f"{key!r} is null or empty; every record needs a key (Flink "
                             f"refuses a null key)")


def _check_table(check: _RecordCheck, table: pa.Table) -> int:
    """Check every record of ``table`` with ``check``; its row count."""
    rows = 0
    for batch in table.to_batches():
        check.batch(batch, rows)
        rows += batch.num_rows
    return rows


@dataclass
class _BadRows:
    """A file's bad records (``on_bad_record`` skip or fail): rows, records, lines left out.

    ``rows``: 0-based, ascending, one per record of ``records``; ``left_out``: the lines its
    reader leaves out (CSV, JSON Lines), or ``None`` where the reader reads them and they are
    dropped from what it read (Parquet).
    """

    rows: list[int]
    records: list[BadRecord]
    left_out: list[int] | None


@dataclass(frozen=True)
class _TypeChanged:
    """pyarrow's JSON reader refused a column of two types (its row 0-based, as it read it)."""

    row: int
    column: str
    old: str
    new: str


def _type_changed(exc: BaseException) -> _TypeChanged | None:
    found = _TYPE_CHANGED.search(str(exc.__cause__ or exc))
    if found is None:
        return None
    return _TypeChanged(int(found["row"]), found["column"].lstrip("/"), found["old"],
                        found["new"])


def _lenient_pass(path: str, key: str | None, typed_key: bool, left_out: Sequence[int],
                  key_as_text: bool = False
                  ) -> tuple[_RecordCheck, tuple[pa.Schema, int] | _TypeChanged]:
    """One read of a CSV or JSON Lines file without ``left_out``, noting bad keys.

    As :func:`_learn`: streamed with the first block's types, read whole when a later block
    does not convert to them. Returns the check and the schema and row count, or where the
    JSON reader refused a column of two types. ``key_as_text``: a CSV key column is read as
    text, so that an empty field is an empty key (not a null, as in a column of numbers) and
    a field such as ``NA`` is text (another kind than numbers), whatever the other keys are.
    """
    text = key if key_as_text and _kind(path) == "csv" else None
    check = _RecordCheck(path, key, typed_key, collect=True)
    try:
        _, reader = _open(path, None, 0, left_out, text)
        try:
            rows = 0
            for batch in reader:
                check.batch(batch, rows)
                rows += batch.num_rows
        finally:
            reader.close()
        MEMORY_POOL.release_unused()
        return check, (reader.schema, rows)
    except InputError:
        pass  # a later block's values do not convert to the first block's types
    check = _RecordCheck(path, key, typed_key, collect=True)
    try:
        table = _read_whole(path, left_out, text)
    except InputError as exc:
        changed = _type_changed(exc)
        if changed is None:
            raise
        return check, changed
    rows = _check_table(check, table)
    schema = table.schema
    del table
    pa.default_memory_pool().release_unused()
    return check, (schema, rows)


def _scan(path: str, kind: str) -> LineMap:
    fs, located = resolve_filesystem(path)
    with _input_errors(path), fs.open_input_stream(located) as stream:
        return scan_lines(stream, kind)


def _learn_lenient(path: str, key: str | None, typed_key: bool, mode: str
                   ) -> tuple[pa.Schema, int, _BadRows | None]:
    """:func:`_learn` finding the bad records instead of refusing the first (``mode``).

    Returns the schema and row count (bad records included) and the bad records, if any.
    A CSV or JSON Lines file is read once as :func:`_learn` reads it; only if that finds
    something is it scanned for its lines (:func:`~formats.bad_records.scan_lines`) and read
    again without the bad records, until a read finds no more (leaving a record out can change
    a column's type, so other records' keys). A CSV key column is read as text to find its bad
    keys, then once more as pyarrow infers it. JSON values of another type than their
    column's are found by :func:`~formats.bad_records.json_mixed_types`.
    """
    kind = _kind(path)
    if kind == "parquet":
        fs, located = resolve_filesystem(path)
        with _input_errors(path), pq.ParquetFile(located, filesystem=fs) as parquet:
            found = (_parquet_bad_keys(path, parquet, key)
                     if key is not None and key in parquet.schema_arrow.names else [])
            rows, schema = parquet.metadata.num_rows, parquet.schema_arrow
        records = [BadRecord(redact(path), row + 1, None, column, reason, detail)
                   for row, reason, column, detail in found]
        return schema, rows, (_BadRows([b[0] for b in found], records, None) if found
                              else None)
    check, outcome = _lenient_pass(path, key, typed_key, ())
    if (not isinstance(outcome, _TypeChanged) and not check.bad and not check.replaced
            and not _binary_columns(outcome[0])):
        return outcome[0], outcome[1], None
    lines = _scan(path, kind)
    bad = {row: (INVALID_UTF8, column, detail) for row, _, column, detail in lines.invalid}
    classified = False
    while True:
        rows_out = sorted(bad)
        left_out = lines.lines_of(rows_out)
        check, outcome = _lenient_pass(path, key, typed_key, left_out, key_as_text=True)
        if kind == "csv" and not check.bad:  # the types, the key's included
            check, outcome = _lenient_pass(path, key, typed_key, left_out)
        if isinstance(outcome, _TypeChanged):
            if not classified and kind == "json":
                classified = True
                fs, located = resolve_filesystem(path)
                with _input_errors(path), fs.open_input_stream(located) as stream:
                    mixed = json_mixed_types(stream, bad)
                if mixed:
                    bad.update((row, (MIXED_TYPE, column, detail))
                               for row, column, detail in mixed)
                    continue
            row = originals([outcome.row], rows_out)[0]
            line = lines.starts([row])[0]
            raise InputError(
                f"{redact(path)}: row {row + 1} (line {line + 1}), column {outcome.column!r}: "
                f"a {outcome.new} where the rows before have a {outcome.old}; every record "
                f"needs one type per column")
        schema, rows = outcome
        for name in _binary_columns(schema):  # not UTF-8 after all: never silent
            raise InputError(f"{redact(path)}: column {name!r} is not text")
        if not check.bad:
            break
        for row, found_bad in zip(originals([b[0] for b in check.bad], rows_out), check.bad,
                                  strict=True):
            bad.setdefault(row, found_bad[1:])
    if rows + len(bad) != lines.records:
        raise InputError(
            f"{redact(path)}: its records do not lie on its lines as statectl reads them "
            f"({lines.records} found, the reader reads {rows + len(bad)}): its bad records "
            f"cannot be left out (--on-bad-record {mode}); give --on-bad-record refuse to "
            f"have the first one named")
    rows_out = sorted(bad)
    records = [BadRecord(redact(path), row + 1, line + 1, bad[row][1], bad[row][0],
                         bad[row][2])
               for row, line in zip(rows_out, lines.starts(rows_out), strict=True)]
    return schema, lines.records, _BadRows(rows_out, records, lines.lines_of(rows_out))


def _binary_columns(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema
            if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]


def _parquet_bad_keys(path: str, parquet: pq.ParquetFile, key: str
                      ) -> list[tuple[int, str, str | None, str]]:
    """A Parquet file's null or empty keys, ``(row, reason, column, detail)`` (0-based rows).

    Only the row groups :func:`_key_row_groups` does not clear are read.
    """
    found: list[tuple[int, str, str | None, str]] = []
    for first, column in _key_row_groups(parquet, key):
        check = _RecordCheck(path, key, collect=True)
        for chunk, offset in _chunks(column):
            check.collect_keys(chunk, first + offset)
        found += check.bad
    return found


class _Cursor:
    """Rows of one file by position, streamed; holds the batches of the last rows taken.

    ``take`` is called with positions that mostly follow each other (the runs of a build;
    records one by one from the start of a run that could not be folded); a position before
    what is held opens the file again, one after it skips forward.
    """

    def __init__(self, path: str, schema: pa.Schema, left_out: Sequence[int] = ()) -> None:
        self.path, self.schema, self.left_out = path, schema, left_out
        self._batches: list[pa.RecordBatch] = []
        self._start = self._end = 0  # rows [start, end) are in self._batches
        self._reader: _Reader | None = None
        self._batches_left: Iterator[pa.RecordBatch] = iter(())

    def take(self, position: int, count: int) -> pa.Table:
        """Rows ``position .. position + count - 1`` (fewer at the end of the file)."""
        if self._reader is None or position < self._start:
            self.close()
            self._start, self._reader = _open(self.path, self.schema, position, self.left_out)
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


#: What :meth:`FileSource.read` yields for a bad record it leaves out, by reason.
_SKIPPED = {reason: SkippedRecord(reason) for reason in REASONS}


class FileSource:
    """Records of ``paths`` as dicts, file by file; positions are row numbers (streamed).

    ``on_bad_record``: ``"refuse"`` (a file holding a bad record is refused when the source is
    opened, naming the first), or ``"skip"``/``"fail"``: bad records are found
    (:func:`_learn_lenient`) and left out of what is read; positions count them, :meth:`read`
    yields a ``SkippedRecord`` for each, and :meth:`first_bad` says where the first one ahead
    is.
    """

    def __init__(self, paths: Sequence[str], key: str | None = None,
                 typed_key: bool = False, on_bad_record: str = REFUSE) -> None:
        """Learn every file's columns and rows, checking each record (:func:`_learn`).

        ``key``: the column records are keyed by; ``typed_key``: its type is given, not
        inferred.
        """
        if not paths:
            raise InvalidArgumentError("give at least one input file")
        if on_bad_record not in ON_BAD_RECORD:
            raise InvalidArgumentError(f"unknown on_bad_record {on_bad_record!r} (one of "
                                       f"{', '.join(ON_BAD_RECORD)})")
        self._paths = list(paths)
        self._rows: dict[str, int] = {}
        self._bad: dict[str, _BadRows] = {}
        schemas: dict[str, pa.Schema] = {}
        for path in self._paths:
            if on_bad_record == REFUSE:
                schemas[path], self._rows[path] = _learn(path, key, typed_key)
                continue
            schemas[path], self._rows[path], bad = _learn_lenient(path, key, typed_key,
                                                                  on_bad_record)
            if bad is not None:
                self._bad[path] = bad
        first = schemas[self._paths[0]]
        for path, schema in schemas.items():
            if not schema.equals(first):
                raise InputError(f"{path} has columns {schema.names} of other types than "
                                 f"{self._paths[0]}: every input needs the same columns")
        self.column_types = {f.name: column_spec(f.type, f.name) for f in first}
        self._cursors = {
            path: _Cursor(path, schemas[path],
                          () if path not in self._bad else self._bad[path].left_out or ())
            for path in self._paths}

    def splits(self) -> Sequence[str]:
        return self._paths

    def count(self) -> int:
        """Records of every file, bad ones included."""
        return sum(self._rows.values())

    def run(self, split: str, position: int, count: int
            ) -> tuple[pa.Table, int, list[BadRecord]]:
        """Records ``position .. position + count - 1`` of ``split`` (fewer at its end).

        Returns the ones that are not bad (a table), the position after the last record, and
        the bad ones among them, in order.
        """
        rows = self._rows[split]
        if position > rows:
            raise InputError(f"{split} has {rows} rows; the checkpoint says "
                             f"{position} were read: was the input changed?")
        bad = self._bad.get(split)
        cursor = self._cursors[split]
        if bad is None:
            table = cursor.take(position, count)
            return table, position + table.num_rows, []
        end = min(position + count, rows)
        lo, hi = bisect_left(bad.rows, position), bisect_left(bad.rows, end)
        wanted = end - position - (hi - lo)
        if bad.left_out is not None:  # the reader leaves them out: its rows are the others
            table = cursor.take(position - lo, wanted)
        else:
            table = cursor.take(position, end - position)
            if hi > lo and table.num_rows == end - position:
                kept, at = [], 0  # slices between the bad rows (no array from Python lists)
                for row in bad.rows[lo:hi]:
                    kept.append(table.slice(at, row - position - at))
                    at = row - position + 1
                kept.append(table.slice(at))
                table = pa.concat_tables(kept)
        if table.num_rows != wanted:
            raise InputError(f"{split} has fewer records than when it was opened: was the "
                             f"input changed?")
        return table, end, bad.records[lo:hi]

    def rows(self, split: str, position: int, count: int) -> pa.Table:
        """The records of ``position .. position + count - 1`` of ``split`` that are not bad."""
        return self.run(split, position, count)[0]

    def read(self, split: str, position: int) -> Iterator[tuple[int, Any]]:
        """``(position after it, record)`` from ``position``: a ``SkippedRecord`` if bad."""
        while True:
            table, end, bad = self.run(split, position, READ_ROWS)
            if end == position:
                return
            records = table.to_pylist()
            if not bad:
                for record in records:
                    position += 1
                    yield position, record
                continue
            good, skipped = iter(records), iter(bad)
            ahead = next(skipped, None)
            for row in range(position + 1, end + 1):
                if ahead is not None and ahead.row == row:  # 1-based: the record before `row`
                    yield row, _SKIPPED[ahead.reason]
                    ahead = next(skipped, None)
                else:
                    yield row, next(good)
            position = end

    def first_bad(self, positions: Mapping[str, int]) -> tuple[int, BadRecord] | None:
        """The first bad record from ``positions`` on, in their order, and the records before it.

        ``positions``: split -> position, in the order the splits are read (a job's);
        returns how many records (none of them bad) come between the positions and it.
        """
        before = 0
        for split, position in positions.items():
            bad = self._bad.get(split)
            if bad is not None:
                index = bisect_left(bad.rows, position)
                if index < len(bad.rows):
                    return before + bad.rows[index] - position, bad.records[index]
            before += self._rows[split] - position
        return None

    def bad_before(self, positions: Mapping[str, int], limit: int = EXAMPLES
                   ) -> list[BadRecord]:
        """The first ``limit`` bad records before ``positions``, in input order."""
        found: list[BadRecord] = []
        for split in self._paths:
            bad = self._bad.get(split)
            if bad is None:
                continue
            for row, record in zip(bad.rows, bad.records, strict=True):
                if row >= positions.get(split, 0) or len(found) == limit:
                    break
                found.append(record)
        return found

    def close(self) -> None:
        """Close the files still open (reading again opens them again)."""
        for cursor in self._cursors.values():
            cursor.close()
