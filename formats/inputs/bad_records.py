"""Bad input records: what ``statectl build --on-bad-record skip|fail`` leaves out, and how.

A bad record is one that would give silent wrong results if it were read as it is
(:mod:`formats.inputs` refuses a file holding one, by default). Each has one reason
(:data:`REASONS`), the first found:

* ``invalid-utf8``: a CSV or JSON Lines record with text that is not UTF-8 (pyarrow would read
  a CSV column holding it as bytes, changing every key's type and key group);
* ``missing-key``: the key is null, or absent (a JSON Lines record without the key field or
  with ``null``, a Parquet null);
* ``empty-key``: the key is the empty string (an empty CSV field, ``""`` in JSON Lines or
  Parquet);
* ``mixed-type``: a value of another type than its column's (a JSON Lines column whose first
  value is a string holding a number; a CSV key column of numbers holding text, ``NA``
  included, or of text holding a number: the column's first key decides which; text in a CSV
  column an aggregation needs numbers in (``sum``, ``min``, ``max``, ``window-count``) whose
  first value is a number, the texts pyarrow reads as null aside);
* ``key-type``: a key that does not convert to the ``--key-type`` (``x`` or ``1.5`` for
  ``int64``, ``3000000000`` for ``int32``: :mod:`formats.inputs.keys`);
* ``malformed``: a record the reader cannot parse: a CSV row with more or fewer fields than
  the header, a JSON Lines line that is not one JSON object.

Left out means out of everything: a CSV or JSON Lines file's bad records are removed from the
bytes its reader sees (:class:`LinesLeftOut`), so the column types are the ones pyarrow infers
over the other records, exactly those of the same file without the bad records. Which lines a
record spans is learnt by :func:`scan_lines` (a CSV record with a quoted line break spans
several). A Parquet file's columns are typed by the file: its bad records are read and
dropped. Positions (``statectl build``'s checkpointed row numbers) count every record of a
file, bad ones included.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from formats.inputs.line_streams import WholeLines

__all__ = ["EMPTY_KEY", "EXAMPLES", "FAIL", "INVALID_UTF8", "KEY_TYPE", "MALFORMED",
           "MISSING_KEY", "MIXED_TYPE", "ON_BAD_RECORD", "REASONS", "REFUSE", "SKIP", "BadRecord",
           "LineMap", "LinesLeftOut", "json_mixed_types", "originals", "scan_lines"]

#: ``--on-bad-record`` values: refuse the input (the default), skip bad records, or fail at
#: the first one after checkpointing the records before it.
REFUSE, SKIP, FAIL = "refuse", "skip", "fail"
ON_BAD_RECORD = (REFUSE, SKIP, FAIL)
INVALID_UTF8, MISSING_KEY, EMPTY_KEY, MIXED_TYPE = ("invalid-utf8", "missing-key", "empty-key",
                                                    "mixed-type")
KEY_TYPE, MALFORMED = "key-type", "malformed"
REASONS = (INVALID_UTF8, MISSING_KEY, EMPTY_KEY, MIXED_TYPE, KEY_TYPE, MALFORMED)
#: Bad records a build summary names (the first ones, in input order).
EXAMPLES = 5

_CHUNK = 1 << 20
# a CSV field as pyarrow's parser reads it (delimiter ",", quote '"', doubled quotes): a quote
# opens a quoted value only at the start of a field; after the closing quote, text goes on
_FIELD = rb'(?:"(?:[^"]|"")*"(?!")[^,]*|[^,"][^,]*|)'
_CSV_RECORD = re.compile(_FIELD + rb"(?:," + _FIELD + rb")*", re.DOTALL)
# lines pyarrow reads no record from: empty CSV lines; JSON Lines of whitespace
_CSV_BLANK = re.compile(rb"^\r?$", re.MULTILINE)
_JSON_BLANK = re.compile(rb"^[ \t\r]*$", re.MULTILINE)
_ESCAPED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8 (surrogateescape)


@dataclass(frozen=True, slots=True)
class BadRecord:
    """One bad input record: where it is and why.

    ``file``: the input as given (credentials of a URI redacted); ``row``: 1-based among the
    file's records; ``line``: the 1-based line where it starts (CSV and JSON Lines; ``None``
    for Parquet); ``column``: the column that makes it bad (``None`` where no column can be
    named: a JSON field name that is not UTF-8); ``reason``: one of :data:`REASONS`;
    ``detail``: what is wrong, for people.
    """

    file: str
    row: int
    line: int | None
    column: str | None
    reason: str
    detail: str

    def where(self) -> str:
        """``<file>: row R (line L), column 'C'`` (the parts that are known)."""
        line = f" (line {self.line})" if self.line is not None else ""
        column = f", column {self.column!r}" if self.column is not None else ""
        return f"{self.file}: row {self.row}{line}{column}"


@dataclass
class LineMap:
    """Where the records of a CSV or JSON Lines file lie on its lines (a newline ends one).

    ``records``: how many there are; ``others``: the 0-based lines where no record starts,
    ascending (a CSV header, blank lines, the further lines of a CSV record with a quoted line
    break); ``continued``: those of the last kind; ``invalid``: the records whose text is not
    UTF-8, as ``(record, line, column, detail)`` (0-based record and line); ``malformed``: the
    records pyarrow's reader cannot parse (:func:`scan_lines` with ``shapes``), likewise.
    """

    records: int = 0
    others: list[int] = field(default_factory=list)
    continued: set[int] = field(default_factory=set)
    invalid: list[tuple[int, int, str | None, str]] = field(default_factory=list)
    malformed: list[tuple[int, int, str | None, str]] = field(default_factory=list)

    def starts(self, rows: Iterable[int]) -> list[int]:
        """The 0-based line where each record of ``rows`` (0-based, ascending) starts."""
        return originals(rows, self.others)  # the lines without records are left out

    def lines_of(self, rows: Iterable[int]) -> list[int]:
        """Every line of the records ``rows`` (0-based, ascending), ascending."""
        lines = []
        for start in self.starts(rows):
            lines.append(start)
            while start + 1 in self.continued:
                start += 1
                lines.append(start)
        return lines


def _lines(stream: BinaryIO) -> Iterator[tuple[bytes, list[bytes]]]:
    """``(chunk, its lines)`` of ``stream``: whole lines, without their newline."""
    pending = b""
    while True:
        chunk = stream.read(_CHUNK)
        data = pending + chunk
        if chunk:
            cut = data.rfind(b"\n")
            if cut < 0:
                pending = data
                continue
            complete, pending = data[:cut], data[cut + 1:]
        elif data:
            complete, pending = data, b""
        else:
            return
        yield complete, complete.split(b"\n")
        if not chunk:
            return


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def scan_lines(stream: BinaryIO, kind: str, shapes: bool = False) -> LineMap:
    """The :class:`LineMap` of a ``"csv"`` or ``"json"`` file, read from ``stream``.

    Lines follow pyarrow's readers: a CSV file's first line that is not empty is its header,
    empty lines hold no record, nor do JSON Lines of whitespace. A chunk of lines that is all
    UTF-8, without quotes (CSV) and without blank lines is counted at once; others line by
    line. ``shapes``: every record is looked at (line by line), and those pyarrow's reader
    cannot parse are noted in :attr:`LineMap.malformed` (:func:`_malformed`).
    """
    is_csv = kind == "csv"
    blank = _CSV_BLANK if is_csv else _JSON_BLANK
    found = LineMap()
    header: list[str] | None = None if is_csv else []
    line = 0
    record: list[bytes] | None = None  # a CSV record whose quoted value goes on
    record_row = record_line = 0

    def finish(row: int, texts: list[bytes], start: int) -> None:
        nonlocal header
        joined = b"\n".join(texts)
        try:
            text = joined.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = joined.decode("utf-8", "surrogateescape")
            if row >= 0:
                found.invalid.append((row, start, _bad_column(text, header, is_csv),
                                      f"not valid UTF-8 (byte 0x{joined[exc.start]:02x} at "
                                      f"character {exc.start + 1})"))
        if row < 0:
            header = next(csv.reader(io.StringIO(text.rstrip("\r"), newline="")), [])
        elif shapes and (not found.invalid or found.invalid[-1][0] != row):
            detail = _malformed(text, header, is_csv)
            if detail is not None:
                found.malformed.append((row, start, None, detail))

    for complete, lines in _lines(stream):
        if (not shapes and record is None and header is not None
                and blank.search(complete) is None
                and not (is_csv and b'"' in complete) and _is_utf8(complete)):
            found.records += len(lines)
            line += len(lines)
            continue
        for text in lines:
            number, line = line, line + 1
            if record is not None:
                found.others.append(number)
                found.continued.add(number)
                record.append(text)
                if _CSV_RECORD.fullmatch(b"\n".join(record)):
                    finish(record_row, record, record_line)
                    record = None
                continue
            if blank.fullmatch(text):
                found.others.append(number)
                continue
            if header is None:  # a CSV file's header
                found.others.append(number)
                row = -1
            else:
                row = found.records
                found.records += 1
            if is_csv and b'"' in text and not _CSV_RECORD.fullmatch(text):
                record, record_row, record_line = [text], row, number
                continue
            finish(row, [text], number)
    if record is not None:  # a quoted value never closed: pyarrow says what is wrong
        finish(record_row, record, record_line)
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON value")


def _malformed(text: str, header: Sequence[str] | None, is_csv: bool) -> str | None:
    """What makes one record unreadable to pyarrow, or ``None``: fields, or JSON syntax."""
    if is_csv:
        fields = next(csv.reader(io.StringIO(text.rstrip("\r"), newline="")), [])
        expected = len(header or ())
        if len(fields) != expected:
            return (f"{len(fields)} field{'s' if len(fields) != 1 else ''} where the header "
                    f"has {expected}")
        return None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg} at character {exc.pos + 1}"
    except ValueError as exc:
        return f"not JSON: {exc}"
    if not isinstance(value, dict):
        return f"a JSON {_json_kind(value) or 'null'}, not an object"
    return None


def _bad_column(text: str, header: Sequence[str] | None, is_csv: bool) -> str | None:
    """The column whose value holds bytes that are not UTF-8 (escaped in ``text``)."""
    if is_csv:
        fields = next(csv.reader(io.StringIO(text.rstrip("\r"), newline="")), [])
        index = next((i for i, value in enumerate(fields) if _ESCAPED.search(value)), -1)
        return header[index] if header is not None and 0 <= index < len(header) else None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return next((name for name, v in value.items()
                 if isinstance(v, str) and _ESCAPED.search(v) and not _ESCAPED.search(name)),
                None)


def _json_kind(value: Any) -> str | None:
    """The name pyarrow gives the JSON type of ``value`` (``None`` for null: any column's)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def json_mixed_types(stream: BinaryIO, bad: Collection[int]) -> list[tuple[int, str, str]]:
    """Records of a JSON Lines file with a value of another JSON type than their column's.

    A column's type is the one of its first value that is not null, among the records not in
    ``bad`` (0-based) and not found here (pyarrow's JSON reader refuses a column of two types,
    and its numbers are one type). Returns ``(record, column, detail)``, 0-based records in
    order. Values nested in objects are not looked at (build refuses such columns anyway).
    """
    kinds: dict[str, str] = {}
    found: list[tuple[int, str, str]] = []
    row = -1
    for _, lines in _lines(stream):
        for text in lines:
            if _JSON_BLANK.fullmatch(text):
                continue
            row += 1
            if row in bad:
                continue
            try:
                value = json.loads(text)
            except ValueError:
                continue  # pyarrow's reader says what is wrong
            if not isinstance(value, dict):
                continue
            seen = {name: kind for name, v in value.items() if (kind := _json_kind(v))}
            other = next(((name, kind) for name, kind in seen.items()
                          if kinds.get(name, kind) != kind), None)
            if other is not None:
                name, kind = other
                found.append((row, name, f"a {kind} where the rows before have a "
                                         f"{kinds[name]}"))
                continue
            for name, kind in seen.items():
                kinds.setdefault(name, kind)
    return found


def originals(rows: Iterable[int], left_out: Sequence[int]) -> list[int]:
    """The records of a file that are ``rows`` (ascending) once ``left_out`` are removed.

    Both 0-based; ``left_out`` ascending: record ``r`` of what remains is the ``r``-th record
    of the file not left out.
    """
    found, j = [], 0
    for row in rows:
        original = row + j
        while j < len(left_out) and left_out[j] <= original:
            j += 1
            original = row + j
        found.append(original)
    return found


class LinesLeftOut(WholeLines):
    """A binary file's bytes without some of its lines: a file object pyarrow's readers take.

    ``lines``: 0-based line numbers to leave out, ascending (a line ends with a newline, which
    goes with it). Reads ``stream`` a chunk at a time; closing closes it.
    """

    def __init__(self, stream: BinaryIO, lines: Sequence[int]) -> None:
        super().__init__(stream)
        self._lines = lines
        self._next = 0  # the next of self._lines still ahead
        self._line = 0  # the number of the first line not yet read

    def take(self, complete: bytes) -> None:
        ends = complete.endswith(b"\n")
        count = complete.count(b"\n") + (0 if ends else 1)
        first, self._line = self._line, self._line + count
        if self._next >= len(self._lines) or self._lines[self._next] >= first + count:
            self._out += complete
            return
        pieces = complete.split(b"\n")
        if ends:
            pieces.pop()
        for i, piece in enumerate(pieces):
            if self._next < len(self._lines) and self._lines[self._next] == first + i:
                self._next += 1
                continue
            self._out += piece
            if ends or i < len(pieces) - 1:
                self._out += b"\n"
