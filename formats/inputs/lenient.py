"""Learning an input's columns and rows, checking its records on the way.

:func:`learn` refuses the first bad record (``--on-bad-record refuse``), naming the file, row,
line and column; :func:`learn_lenient` finds them all instead (``skip``, ``fail``) and says
which lines a reader leaves out to read the file without them (:mod:`formats.inputs.bad_records`).

CSV and JSON Lines files are read as a stream with the first block's column types; when a
later block does not convert to them, the file is read whole once to infer them over every
row (memory for that file's table, while the source is opened). A file without records (an
empty file, a CSV header alone) has no column types: :attr:`Learnt.rows` is 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from formats.inputs.bad_records import (
    INVALID_UTF8,
    MALFORMED,
    MIXED_TYPE,
    BadRecord,
    LineMap,
    json_mixed_types,
    originals,
    scan_lines,
)
from formats.inputs.checks import Expected, RecordCheck, check_table, line_of
from formats.inputs.parquet import check_parquet_keys, parquet_bad_keys
from formats.inputs.reading import (
    INVALID_TEXT,
    MEMORY_POOL,
    PARSE_ERROR,
    TYPE_CHANGED,
    InputError,
    input_errors,
    kind_of,
    open_reader,
    read_whole,
)
from formats.storage.filesystems import redact, resolve_filesystem

__all__ = ["BadRows", "learn", "learn_lenient"]


@dataclass
class BadRows:
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


@dataclass(frozen=True)
class _ParseFailed:
    """pyarrow's reader could not parse a record (:data:`~formats.inputs.reading.PARSE_ERROR`)."""

    error: InputError


def _type_changed(exc: BaseException) -> _TypeChanged | None:
    found = TYPE_CHANGED.search(str(exc.__cause__ or exc))
    if found is None:
        return None
    return _TypeChanged(int(found["row"]), found["column"].lstrip("/"), found["old"],
                        found["new"])


def _empty(exc: BaseException) -> bool:
    return "Empty CSV file" in str(exc) or "Empty JSON file" in str(exc)


def _no_records() -> tuple[pa.Schema, int]:
    return pa.schema([]), 0


def _scan(path: str, kind: str, shapes: bool = False) -> LineMap:
    fs, located = resolve_filesystem(path)
    with input_errors(path), fs.open_input_stream(located) as stream:
        return scan_lines(stream, kind, shapes)


def _stream(path: str, expected: Expected, check: RecordCheck, left_out: Sequence[int] = (),
            text: str | None = None) -> tuple[pa.Schema, int]:
    """One streamed read of ``path`` (the first block's types), every batch checked."""
    _, reader = open_reader(path, None, 0, left_out, text)
    try:
        rows = 0
        for batch in reader:
            check.batch(batch, rows)
            rows += batch.num_rows
    finally:
        reader.close()
    MEMORY_POOL.release_unused()  # the reader's blocks: freed, but kept unless told
    return reader.schema, rows


def _a(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def _first_malformed(path: str, kind: str) -> InputError | None:
    """The refusal of the first record of ``path`` pyarrow's reader cannot parse, if any."""
    lines = _scan(path, kind, shapes=True)
    if not lines.malformed:
        return None
    row, line, _, detail = lines.malformed[0]
    return InputError(f"{redact(path)}: row {row + 1} (line {line + 1}): {detail}; "
                      f"--on-bad-record skip leaves such records out")


def _unreadable(path: str, exc: InputError) -> InputError:
    """The refusal of a file pyarrow cannot read, naming the record where it can be found.

    A JSON record cut short can make pyarrow's reader take the next line as its value (and
    then find a column of two types): a malformed record is looked for first.
    """
    kind = kind_of(path)
    if INVALID_TEXT.search(str(exc)):  # a column read as text (a string key) is not UTF-8
        invalid = _scan(path, kind).invalid
        if invalid:
            _, line, column, detail = invalid[0]
            named = f", column {column!r}" if column is not None else ""
            return InputError(f"{redact(path)}: line {line + 1}{named}: {detail}; statectl "
                              f"reads text inputs as UTF-8")
    changed = _type_changed(exc)
    if PARSE_ERROR.search(str(exc)) or (changed is not None and kind == "json"):
        malformed = _first_malformed(path, kind)
        if malformed is not None:
            return malformed
    if changed is not None:  # pyarrow's row: 0-based among the records
        found = line_of(path, changed.row)
        at = f" (line {found})" if found is not None else ""
        return InputError(
            f"{redact(path)}: row {changed.row + 1}{at}, column {changed.column!r}: "
            f"{_a(changed.new)} where the rows before have {_a(changed.old)}; every record "
            f"needs one type per column")
    return exc


def learn(path: str, expected: Expected) -> tuple[pa.Schema, int]:
    """The schema and row count of ``path``, refusing its first bad record (module doc).

    What would silently give wrong results is refused, naming the file, row and column
    (:class:`InputError`; :mod:`formats.inputs.checks`): text that is not UTF-8 (pyarrow
    reads such a CSV column as bytes, which would change every key's type and key group; a
    JSON reader replaces the bytes with U+FFFD), a record whose key is null or empty (missing
    in JSON Lines, an empty CSV field): Flink refuses a null key, and an empty one is no key a
    job means; a key of no ``--key-type`` value; a record pyarrow cannot parse.
    """
    kind = kind_of(path)
    if kind == "parquet":
        fs, located = resolve_filesystem(path)
        with input_errors(path), pq.ParquetFile(located, filesystem=fs) as parquet:
            if expected.key is not None and expected.key in parquet.schema_arrow.names:
                check_parquet_keys(path, parquet, expected)
            return parquet.schema_arrow, parquet.metadata.num_rows
    text = expected.text(kind)
    check = RecordCheck(path, expected)
    try:
        schema, rows = _stream(path, expected, check, text=text)
    except InputError as exc:  # a later block's values do not convert to the first's types
        if _empty(exc):
            return _no_records()
        try:
            table = read_whole(path, text=text)  # infers over every row
        except InputError as whole:
            if _empty(whole):
                return _no_records()
            raise _unreadable(path, whole) from whole
        check = RecordCheck(path, expected)
        rows = check_table(check, table)
        schema = table.schema
        del table
        pa.default_memory_pool().release_unused()  # read_table's pool
    check.finish(schema)
    return schema, rows


def _lenient_pass(path: str, expected: Expected, left_out: Sequence[int],
                  key_as_text: bool = False
                  ) -> tuple[RecordCheck, tuple[pa.Schema, int] | _TypeChanged | _ParseFailed]:
    """One read of a CSV or JSON Lines file without ``left_out``, noting bad records.

    As :func:`learn`: streamed with the first block's types, read whole when a later block
    does not convert to them. Returns the check and the schema and row count, or where the
    JSON reader refused a column of two types, or that a record could not be parsed.
    ``key_as_text``: a CSV key column is read as text, so that an empty field is an empty key
    (not a null, as in a column of numbers) and a field such as ``NA`` is text (another kind
    than numbers), whatever the other keys are.
    """
    kind = kind_of(path)
    text = expected.text(kind) or (expected.key if key_as_text and kind == "csv" else None)
    check = RecordCheck(path, expected, collect=True)
    try:
        return check, _stream(path, expected, check, left_out, text)
    except InputError as exc:
        if _empty(exc):
            return check, _no_records()
    check = RecordCheck(path, expected, collect=True)
    try:
        table = read_whole(path, left_out, text)
    except InputError as exc:
        if _empty(exc):
            return check, _no_records()
        changed = _type_changed(exc)
        if changed is not None:
            return check, changed
        if PARSE_ERROR.search(str(exc)) or INVALID_TEXT.search(str(exc)):
            return check, _ParseFailed(exc)  # the scan finds the record (and its bytes)
        raise
    rows = check_table(check, table)
    schema = table.schema
    del table
    pa.default_memory_pool().release_unused()
    return check, (schema, rows)


def learn_lenient(path: str, expected: Expected, mode: str
                  ) -> tuple[pa.Schema, int, BadRows | None]:
    """:func:`learn` finding the bad records instead of refusing the first (``mode``).

    Returns the schema and row count (bad records included) and the bad records, if any.
    A CSV or JSON Lines file is read once as :func:`learn` reads it; only if that finds
    something is it scanned for its lines (:func:`~formats.inputs.bad_records.scan_lines`; record by
    record when a record could not be parsed) and read again without the bad records, until a
    read finds no more (leaving a record out can change a column's type, so other records'
    keys). A CSV key column is read as text to find its bad keys, then once more as pyarrow
    infers it. JSON values of another type than their column's are found by
    :func:`~formats.inputs.bad_records.json_mixed_types`.
    """
    kind = kind_of(path)
    if kind == "parquet":
        fs, located = resolve_filesystem(path)
        with input_errors(path), pq.ParquetFile(located, filesystem=fs) as parquet:
            found = (parquet_bad_keys(path, parquet, expected)
                     if expected.key is not None and expected.key in parquet.schema_arrow.names
                     else [])
            rows, schema = parquet.metadata.num_rows, parquet.schema_arrow
        records = [BadRecord(redact(path), row + 1, None, column, reason, detail)
                   for row, reason, column, detail in found]
        return schema, rows, (BadRows([b[0] for b in found], records, None) if found
                              else None)
    check, outcome = _lenient_pass(path, expected, ())
    if (isinstance(outcome, tuple) and not check.bad and not check.replaced
            and not _binary_columns(outcome[0])):
        return outcome[0], outcome[1], None
    shapes = isinstance(outcome, _ParseFailed)
    lines = _scan(path, kind, shapes)
    bad = {row: (INVALID_UTF8, column, detail) for row, _, column, detail in lines.invalid}
    bad.update((row, (MALFORMED, column, detail)) for row, _, column, detail in lines.malformed)
    classified = False
    while True:
        rows_out = sorted(bad)
        left_out = lines.lines_of(rows_out)
        check, outcome = _lenient_pass(path, expected, left_out, key_as_text=True)
        if kind == "csv" and not check.bad and isinstance(outcome, tuple):
            check, outcome = _lenient_pass(path, expected, left_out)  # the key's type too
        if isinstance(outcome, _ParseFailed):
            if shapes:
                raise _unreadable(path, outcome.error) from outcome.error
            shapes = True
            lines = _scan(path, kind, shapes)
            for row, _, column, detail in lines.malformed:
                bad.setdefault(row, (MALFORMED, column, detail))
            continue
        if isinstance(outcome, _TypeChanged):
            if not shapes and kind == "json":  # a record cut short reads into the next line
                shapes = True
                lines = _scan(path, kind, shapes)
                if any(row not in bad for row, *_ in lines.malformed):
                    for row, _, column, detail in lines.malformed:
                        bad.setdefault(row, (MALFORMED, column, detail))
                    continue
            if not classified and kind == "json":
                classified = True
                fs, located = resolve_filesystem(path)
                with input_errors(path), fs.open_input_stream(located) as stream:
                    mixed = json_mixed_types(stream, bad)
                if mixed:
                    bad.update((row, (MIXED_TYPE, column, detail))
                               for row, column, detail in mixed)
                    continue
            row = originals([outcome.row], rows_out)[0]
            line = lines.starts([row])[0]
            raise InputError(
                f"{redact(path)}: row {row + 1} (line {line + 1}), column {outcome.column!r}: "
                f"{_a(outcome.new)} where the rows before have {_a(outcome.old)}; every record "
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
    return schema, lines.records, BadRows(rows_out, records, lines.lines_of(rows_out))


def _binary_columns(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema
            if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
