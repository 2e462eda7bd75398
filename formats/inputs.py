"""Input records for ``statectl build``: Parquet, CSV and JSON Lines files, read with pyarrow.

A :class:`FileSource` is a replayable source (``statecore.job.Source``): each input file is a
split and a position is a row number, so a resumed build reads every file from the row its
checkpoint recorded. Column types come from the files' Arrow schema and map to statectl type
specs (int8..int64, float32/float64, bool, string, bytes); every file must have the same ones.

Each file is parsed once: CSV and JSON Lines files have to be read whole to learn their schema,
so the tables read then are kept for the run (up to :data:`TABLE_CACHE_BYTES` together; beyond
that a file is read again when its records are read). Parquet files give their schema and row
count from their footer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from formats.filesystems import redact, resolve_filesystem, storage_errors
from statecore.errors import InvalidArgumentError, StatectlError

__all__ = ["TABLE_CACHE_BYTES", "FileSource", "InputError", "column_spec", "read_input"]

#: Bytes of input tables a :class:`FileSource` keeps in memory between reads.
TABLE_CACHE_BYTES = 1 << 30

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


def read_input(path: str) -> pa.Table:
    """An input file (a local path or a URI) as an Arrow table, by its extension.

    Parquet, CSV or JSON Lines; the extension is the path's, before any URI query.
    """
    fs, located = resolve_filesystem(path)
    lower = located.lower()
    try:
        with storage_errors("reading input", path):
            if lower.endswith((".parquet", ".pq")):
                return pq.read_table(located, filesystem=fs)
            if lower.endswith(".csv"):
                with fs.open_input_stream(located) as stream:
                    return pacsv.read_csv(stream)
            if lower.endswith((".jsonl", ".ndjson", ".json")):
                with fs.open_input_stream(located) as stream:
                    return pajson.read_json(stream)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"cannot read {redact(path)}: {exc}") from exc
    raise InputError(f"{redact(path)}: unknown input format (use .parquet, .csv or .jsonl)")


def _is_parquet(path: str) -> bool:
    return path.lower().endswith((".parquet", ".pq"))


class FileSource:
    """Records of ``paths`` as dicts, file by file; positions are row numbers."""

    def __init__(self, paths: Sequence[str]) -> None:
        if not paths:
            raise InvalidArgumentError("give at least one input file")
        self._paths = list(paths)
        self._tables: dict[str, pa.Table] = {}
        self._rows: dict[str, int] = {}
        schemas = {path: self._schema(path) for path in self._paths}
        first = schemas[self._paths[0]]
        for path, schema in schemas.items():
            if not schema.equals(first):
                raise InputError(f"{path} has columns {schema.names} of other types than "
                                 f"{self._paths[0]}: every input needs the same columns")
        self.column_types = {f.name: column_spec(f.type, f.name) for f in first}

    def _schema(self, path: str) -> pa.Schema:
        if _is_parquet(path):
            try:
                with pq.ParquetFile(path) as parquet:
                    self._rows[path] = parquet.metadata.num_rows
                    return parquet.schema_arrow
            except (pa.ArrowException, OSError) as exc:
                raise InputError(f"cannot read {path}: {exc}") from exc
        table = self.table(path)
        return table.schema

    def table(self, split: str) -> pa.Table:
        """The whole file ``split`` as an Arrow table (kept while the cache has room)."""
        table = self._tables.get(split)
        if table is None:
            table = read_input(split)
            # the readers' buffers (a CSV's text, its parsed blocks) are freed, but Arrow's
            # allocator keeps them for reuse unless told: 2-3x the table, held for the build
            pa.default_memory_pool().release_unused()
            self._rows[split] = table.num_rows
            if sum(t.nbytes for t in self._tables.values()) + table.nbytes <= TABLE_CACHE_BYTES:
                self._tables[split] = table
        return table

    def splits(self) -> Sequence[str]:
        return self._paths

    def count(self) -> int:
        return sum(self._rows[path] if path in self._rows else self.table(path).num_rows
                   for path in self._paths)

    def checked_table(self, split: str, position: int) -> pa.Table:
        """``split``'s table, after checking that it has at least ``position`` rows."""
        table = self.table(split)
        if position > table.num_rows:
            raise InputError(f"{split} has {table.num_rows} rows; the checkpoint says "
                             f"{position} were read: was the input changed?")
        return table

    def read(self, split: str, position: int) -> Iterator[tuple[int, Any]]:
        table = self.checked_table(split, position)
        for offset, batch in _batches(table.slice(position)):
            for i, record in enumerate(batch.to_pylist()):
                yield position + offset + i + 1, record


def _batches(table: pa.Table) -> Iterator[tuple[int, pa.RecordBatch]]:
    offset = 0
    for batch in table.to_batches(max_chunksize=4096):
        yield offset, batch
        offset += batch.num_rows
