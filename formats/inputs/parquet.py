"""The key checks of a Parquet input: its column types are the file's, only keys can be bad.

A Parquet file's null or empty keys, and keys that do not convert to the ``--key-type``
(:mod:`formats.inputs.keys`), read from the row groups whose statistics do not clear them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from formats.inputs.checks import Expected, RecordCheck
from formats.inputs.keys import key_arrow_type, unconvertible
from formats.inputs.reading import InputError, chunks, first_missing_key, is_text
from formats.storage.filesystems import redact

__all__ = ["check_parquet_keys", "parquet_bad_keys"]


def _key_row_groups(parquet: pq.ParquetFile, key: str, every: bool
                    ) -> Iterator[tuple[int, pa.ChunkedArray]]:
    """The key column of each row group its statistics do not clear of null or empty keys.

    Yields ``(first, column)``: ``first`` is the 0-based row of the file the group starts at.
    The statistics clear most row groups, which are then not read (``every``: none cleared).
    """
    field = parquet.schema_arrow.field(key)
    names = parquet.metadata.schema.names
    column_index = names.index(key) if key in names else -1
    text = is_text(field.type)
    first = 0
    for group in range(parquet.metadata.num_row_groups):
        meta = parquet.metadata.row_group(group)
        stats = meta.column(column_index).statistics if column_index >= 0 else None
        cleared = (not every and stats is not None and stats.has_null_count
                   and stats.null_count == 0
                   and (not text or (stats.has_min_max and stats.min not in ("", b""))))
        if not cleared:
            yield first, parquet.read_row_group(group, columns=[key]).column(0)
        first += meta.num_rows


def _target(parquet: pq.ParquetFile, expected: Expected) -> pa.DataType | None:
    assert expected.key is not None
    target = key_arrow_type(expected.key_type, parquet.schema_arrow.field(expected.key).type)
    return None if target == pa.string() else target  # every value has a text


def check_parquet_keys(path: str, parquet: pq.ParquetFile, expected: Expected) -> None:
    """Refuse a Parquet file's first bad key, naming its row."""
    key = expected.key
    assert key is not None
    target = _target(parquet, expected)
    for first, column in _key_row_groups(parquet, key, target is not None):
        for chunk, offset in chunks(column):
            found = first_missing_key(chunk)
            if found >= 0:
                raise InputError(f"{redact(path)}: row {first + offset + found + 1}: the key "
                                 f"column {key!r} is null or empty; every record needs a key "
                                 f"(Flink refuses a null key)")
            wrong = unconvertible(chunk, target) if target is not None else []
            if wrong:
                raise InputError(
                    f"{redact(path)}: row {first + offset + wrong[0] + 1}, column {key!r}: the "
                    f"key {chunk[wrong[0]].as_py()!r} does not convert to {expected.key_type} "
                    f"(--key-type {expected.key_type}); --on-bad-record skip leaves such records "
                    f"out")


def parquet_bad_keys(path: str, parquet: pq.ParquetFile, expected: Expected
                     ) -> list[tuple[int, str, str | None, str]]:
    """A Parquet file's bad keys, ``(row, reason, column, detail)`` (0-based rows, in order)."""
    key = expected.key
    assert key is not None
    target = _target(parquet, expected)
    found: list[tuple[int, str, str | None, str]] = []
    for first, column in _key_row_groups(parquet, key, target is not None):
        check = RecordCheck(path, expected, collect=True)
        for chunk, offset in chunks(column):
            check.collect_keys(chunk, first + offset)
        found += sorted(check.bad)
    return found
