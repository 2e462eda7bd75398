"""A replayable source of input records for ``statectl build`` (:class:`FileSource`)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from formats.inputs.bad_records import EXAMPLES, ON_BAD_RECORD, REASONS, REFUSE, BadRecord
from formats.inputs.checks import Expected
from formats.inputs.keys import convert_keys, key_arrow_type
from formats.inputs.lenient import BadRows, learn, learn_lenient
from formats.inputs.reading import InputError, Reader, column_spec, kind_of, open_reader
from formats.storage.filesystems import redact
from statecore.errors import InvalidArgumentError
from statecore.job import SkippedRecord

__all__ = ["READ_ROWS", "FileSource", "empty_table", "no_records"]

#: Rows turned into Python records at a time by :meth:`FileSource.read`.
READ_ROWS = 4096


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` without rows.

    Not ``Schema.empty_table`` nor arrays from Python lists: pyarrow imports pandas for them
    (35 MB a build never needs).
    """
    return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def no_records(paths: Sequence[str]) -> InputError:
    """The refusal of inputs none of which holds a record."""
    return InputError(f"{redact(paths[0])}: no records to build from (a CSV header alone, an "
                      f"empty file, or only bad records)" + (
                          "; nor have the other inputs" if len(paths) > 1 else ""))


class _Cursor:
    """Rows of one file by position, streamed; holds the batches of the last rows taken.

    ``take`` is called with positions that mostly follow each other (the runs of a build;
    records one by one from the start of a run that could not be folded); a position before
    what is held opens the file again, one after it skips forward.
    """

    def __init__(self, path: str, schema: pa.Schema, left_out: Sequence[int] = (),
                 text: str | None = None) -> None:
        self.path, self.schema, self.left_out, self.text = path, schema, left_out, text
        self._batches: list[pa.RecordBatch] = []
        self._start = self._end = 0  # rows [start, end) are in self._batches
        self._reader: Reader | None = None
        self._batches_left: Iterator[pa.RecordBatch] = iter(())

    def take(self, position: int, count: int) -> pa.Table:
        """Rows ``position .. position + count - 1`` (fewer at the end of the file)."""
        if self._reader is None or position < self._start:
            self.close()
            self._start, self._reader = open_reader(self.path, self.schema, position,
                                                    self.left_out, self.text)
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
    (:func:`~formats.inputs.lenient.learn_lenient`) and left out of what is read; positions
    count them, :meth:`read` yields a ``SkippedRecord`` for each, and :meth:`first_bad` says
    where the first one ahead is.

    ``key_type``: the key's type when given (``--key-type``): keys are read as values of it
    (:mod:`formats.inputs.keys`), and :attr:`column_types` says so. ``numeric``: columns an
    aggregation needs numbers in (text in such a CSV column is a bad record).

    A CSV or JSON Lines file without records (a header alone, an empty file, or only bad
    records) adds none and has no column types to agree with the others'; if no input has a
    record, the source is refused (``records_needed=False``: it has no columns,
    :attr:`has_records` is false).
    """

    def __init__(self, paths: Sequence[str], key: str | None = None,
                 key_type: str | None = None, on_bad_record: str = REFUSE,
                 numeric: Collection[str] = (), *, records_needed: bool = True) -> None:
        """Learn every file's columns and rows, checking each record (see the class doc)."""
        if not paths:
            raise InvalidArgumentError("give at least one input file")
        if on_bad_record not in ON_BAD_RECORD:
            raise InvalidArgumentError(f"unknown on_bad_record {on_bad_record!r} (one of "
                                       f"{', '.join(ON_BAD_RECORD)})")
        expected = Expected(key, key_type, frozenset(numeric))
        self._paths = list(paths)
        self._rows: dict[str, int] = {}
        self._bad: dict[str, BadRows] = {}
        schemas: dict[str, pa.Schema] = {}
        for path in self._paths:
            if on_bad_record == REFUSE:
                schemas[path], self._rows[path] = learn(path, expected)
                continue
            schemas[path], self._rows[path], bad = learn_lenient(path, expected, on_bad_record)
            if bad is not None:
                self._bad[path] = bad
        #: the CSV and JSON Lines files without a record to read: no column types
        self._empty = {path for path in self._paths
                       if kind_of(path) != "parquet" and self._rows[path] == len(
                           self._bad[path].rows if path in self._bad else ())}
        typed = [path for path in self._paths if path not in self._empty]
        #: whether some input has a record to read
        self.has_records = bool(typed)
        if not typed and records_needed:
            raise no_records(self._paths)
        first = schemas[typed[0]] if typed else pa.schema([])
        for path in typed:
            if not schemas[path].equals(first):
                raise InputError(f"{path} has columns {schemas[path].names} of other types "
                                 f"than {typed[0]}: every input needs the same columns")
        self._key = key
        self._target = (key_arrow_type(key_type, first.field(key).type)
                        if key is not None and key in first.names else None)
        #: the columns of every record read, the key's converted to its ``key_type``
        self.schema = first if self._target is None else first.set(
            first.get_field_index(key), pa.field(key, self._target))
        self.column_types = {f.name: column_spec(f.type, f.name) for f in self.schema}
        self._cursors = {
            path: _Cursor(path, schemas[path],
                          () if path not in self._bad else self._bad[path].left_out or (),
                          expected.text(kind_of(path)))
            for path in typed}

    def splits(self) -> Sequence[str]:
        return self._paths

    def count(self) -> int:
        """Records of every file, bad ones included."""
        return sum(self._rows.values())

    def bad_records(self, split: str) -> list[BadRecord]:
        """Every bad record of ``split`` (``on_bad_record`` skip or fail), in order."""
        bad = self._bad.get(split)
        return [] if bad is None else list(bad.records)

    def _take(self, split: str, position: int, count: int) -> pa.Table | None:
        """Rows of ``split`` as its reader reads them (``None``: none)."""
        if count <= 0 or split in self._empty:
            return None
        return self._cursors[split].take(position, count)

    def _converted(self, table: pa.Table | None) -> pa.Table:
        """Rows read, the key converted to its ``key_type`` (see the class doc)."""
        if table is None:
            return empty_table(self.schema)
        if self._target is not None and self._key is not None:
            return convert_keys(table, self._key, self._target)
        return table

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
        if bad is None:
            table = self._converted(self._take(split, position, min(count, rows - position)))
            return table, position + table.num_rows, []
        end = min(position + count, rows)
        lo, hi = bisect_left(bad.rows, position), bisect_left(bad.rows, end)
        wanted = end - position - (hi - lo)
        if bad.left_out is not None:  # the reader leaves them out: its rows are the others
            table = self._converted(self._take(split, position - lo, wanted))
        else:
            read = self._take(split, position, end - position)
            table = read if read is not None else empty_table(self.schema)
            if read is not None and hi > lo and table.num_rows == end - position:
                kept, at = [], 0  # slices between the bad rows (no array from Python lists)
                for row in bad.rows[lo:hi]:
                    kept.append(table.slice(at, row - position - at))
                    at = row - position + 1
                kept.append(table.slice(at))
                table = pa.concat_tables(kept)
            table = self._converted(table)
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
