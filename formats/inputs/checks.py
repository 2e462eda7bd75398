"""The checks of a CSV or JSON Lines file's records as they stream (:class:`RecordCheck`).

What would give silent wrong results, or fail a build halfway, is found here, naming the
file, row, line and column: a key that is null, empty or missing; a CSV key column of numbers
and other text (one record would decide every key's type); a key that does not convert to the
``--key-type`` (:mod:`formats.inputs.keys`); text in a CSV column an aggregation sums (or
takes the min/max of) where the column's first value is a number; text that is not UTF-8.
Refused at the first one by default; noted in :attr:`RecordCheck.bad` with ``collect``
(``--on-bad-record skip|fail``: :mod:`formats.inputs.lenient`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from formats.inputs.bad_records import EMPTY_KEY, KEY_TYPE, MISSING_KEY, MIXED_TYPE, scan_lines
from formats.inputs.keys import key_arrow_type, unconvertible
from formats.inputs.reading import (
    NUMBER_LIKE,
    InputError,
    first_missing_key,
    input_errors,
    is_text,
    kind_of,
)
from formats.storage.filesystems import redact, resolve_filesystem

__all__ = ["Expected", "RecordCheck", "check_table", "line_of"]

#: Text pyarrow's CSV reader reads as null in a column of numbers
_NULLS = frozenset(pacsv.ConvertOptions().null_values)


@dataclass(frozen=True)
class Expected:
    """What a build needs of its records.

    ``key``: the column records are keyed by; ``key_type``: its type when given
    (``--key-type``), else ``None`` (the column's); ``numeric``: columns an aggregation needs
    numbers in (``sum``, ``min``, ``max``, ``window-count``).
    """

    key: str | None = None
    key_type: str | None = None
    numeric: Collection[str] = field(default_factory=frozenset)

    def text(self, kind: str) -> str | None:
        """The column a CSV or JSON Lines file is read with as text: a ``string`` key."""
        return self.key if self.key_type == "string" and kind in ("csv", "json") else None


def line_of(path: str, row: int) -> int | None:
    """The 1-based line where record ``row`` (0-based) of a CSV or JSON Lines file starts."""
    kind = kind_of(path)
    if kind == "parquet":
        return None
    fs, located = resolve_filesystem(path)
    with input_errors(path), fs.open_input_stream(located) as stream:
        lines = scan_lines(stream, kind)
    return lines.starts([row])[0] + 1 if row < lines.records else None


class RecordCheck:
    """The checks of the module doc over a file's batches, as they stream.

    ``collect``: what is bad is noted in :attr:`bad` instead of refused.
    """

    def __init__(self, path: str, expected: Expected, collect: bool = False) -> None:
        self.path, self.expected, self.kind = path, expected, kind_of(path)
        self.key = expected.key
        #: a JSON string column is not UTF-8, or holds U+FFFD (maybe a replaced invalid byte)
        self.replaced = False
        #: a CSV text key column's first number-like and first other value: (row, value)
        self.number_like: tuple[int, str] | None = None
        self.other: tuple[int, str] | None = None
        self.collect = collect
        #: collect: the bad records found, ``(row, reason, column, detail)`` (0-based rows)
        self.bad: list[tuple[int, str, str | None, str]] = []
        #: collect: whether the CSV text key column's first key looks like a number
        self.first_number: bool | None = None
        #: per numeric CSV column read as text: whether its first value is a number
        self.numbers_first: dict[str, bool] = {}

    def where(self, row: int) -> str:
        """Row ``row`` (0-based) for people: 1-based, and the line where it starts."""
        line = line_of(self.path, row)
        return f"{redact(self.path)}: row {row + 1}" + (f" (line {line})" if line else "")

    def refuse(self, row: int, column: str | None, detail: str, advice: str = "") -> None:
        named = f", column {column!r}" if column is not None else ""
        raise InputError(f"{self.where(row)}{named}: {detail}{advice}")

    def batch(self, batch: pa.RecordBatch, first: int) -> None:
        """Check the rows ``first ..`` (0-based) of the file."""
        if self.key is not None and self.key in batch.schema.names and self.collect:
            self.collect_keys(batch.column(self.key), first)
        elif self.key is not None and self.key in batch.schema.names:
            column = batch.column(self.key)
            index = first_missing_key(column)
            if index >= 0:
                what = ("is empty or missing" if is_text(column.type)
                        else "has no value (null)")
                raise InputError(
                    f"{self.where(first + index)}: the key column {self.key!r} {what}; every "
                    f"record needs a key (Flink refuses a null key)")
            if self.kind == "csv" and self.expected.key_type is None and is_text(column.type):
                self._mixed(column, first)
            self._key_types(column, first)
        if self.kind == "csv":
            self._numbers(batch, first)
        if self.kind == "json" and not self.replaced:
            for arrow_field, column in zip(batch.schema, batch.columns, strict=True):
                if not pa.types.is_string(arrow_field.type):
                    continue
                try:  # the streaming reader keeps the bytes as they are: not UTF-8 at times
                    column.validate(full=True)
                except pa.ArrowInvalid:
                    self.replaced = True
                    break
                # the whole-file reader puts U+FFFD where the bytes were not UTF-8
                if pc.max(pc.find_substring(column, pattern="\ufffd")).as_py() not in (-1, None):
                    self.replaced = True

    def _key_types(self, column: pa.Array, first: int) -> None:
        """Keys that do not convert to the ``--key-type`` (nulls and empty keys aside)."""
        assert self.key is not None
        target = key_arrow_type(self.expected.key_type, column.type)
        if target is None:
            return
        found = unconvertible(column, target)
        if is_text(column.type):  # an empty key is one already
            found = [i for i in found if column[i].as_py() != ""]
        for index in found:
            detail = (f"the key {column[index].as_py()!r} does not convert to "
                      f"{self.expected.key_type} "
                      f"(--key-type {self.expected.key_type})")
            if not self.collect:
                self.refuse(first + index, self.key, detail,
                            "; --on-bad-record skip leaves such records out")
            self.bad.append((first + index, KEY_TYPE, self.key, detail))

    def _numbers(self, batch: pa.RecordBatch, first: int) -> None:
        """Text in a CSV column of numbers an aggregation needs (its first value decides)."""
        for name in self.expected.numeric:
            if name not in batch.schema.names or name == self.key:
                continue
            column = batch.column(name)
            if not is_text(column.type):
                continue
            null_like = pc.is_in(column, value_set=pa.array(sorted(_NULLS)))
            numeric = pc.match_substring_regex(column, NUMBER_LIKE)
            if name not in self.numbers_first:
                values = pc.indices_nonzero(pc.invert(null_like)).to_pylist()
                if not values:
                    continue
                self.numbers_first[name] = bool(numeric[values[0]].as_py())
            if not self.numbers_first[name]:
                continue  # text from its first value on: the aggregation refuses the column
            for index in pc.indices_nonzero(pc.invert(pc.or_kleene(numeric, null_like))
                                            ).to_pylist():
                detail = (f"{column[index].as_py()!r} is not a number, where the column's "
                          f"first value is one (an aggregation of {name!r} needs numbers)")
                if not self.collect:
                    self.refuse(first + index, name, detail,
                                "; --on-bad-record skip leaves such records out")
                self.bad.append((first + index, MIXED_TYPE, name, detail))

    def collect_keys(self, column: pa.Array, first: int) -> None:
        """Note the keys that are null or empty, and (CSV) those of the other kind.

        ``column``: the key column of the rows ``first ..`` (0-based) of the file.
        """
        assert self.key is not None
        nulls = pc.is_null(column)
        text = is_text(column.type)
        # kernels without Python scalars (see _mixed); empty: a text of length 0
        empty = pc.invert(pc.cast(pc.utf8_length(column), pa.bool_())) if text else None
        found = [(first + i, MISSING_KEY, self.key, f"the key column {self.key!r} has no "
                  f"value (null or absent)") for i in pc.indices_nonzero(nulls).to_pylist()]
        if empty is not None:
            found += [(first + i, EMPTY_KEY, self.key, f"the key column {self.key!r} is empty")
                      for i in pc.indices_nonzero(empty).to_pylist()]
        if self.kind == "csv" and self.expected.key_type is None and empty is not None:
            numeric = pc.match_substring_regex(column, NUMBER_LIKE)
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
        self._key_types(column, first)

    def _mixed(self, column: pa.Array, first: int) -> None:
        """Note the first number-like and the first other key of a CSV text key column."""
        if self.number_like is not None and self.other is not None:
            return
        # kernels without Python scalars (a scalar argument makes pyarrow import pandas); the
        # column has no nulls (checked before)
        numeric = pc.match_substring_regex(column, NUMBER_LIKE)
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
            for arrow_field in schema:
                if pa.types.is_binary(arrow_field.type) or pa.types.is_large_binary(
                        arrow_field.type):
                    self._invalid_utf8(arrow_field.name)
        elif self.replaced:
            self._invalid_utf8(None)

    def _invalid_utf8(self, column: str | None) -> None:
        """Raise naming the first line that is not UTF-8 (and the column, for CSV)."""
        fs, located = resolve_filesystem(self.path)
        with input_errors(self.path), fs.open_input_stream(located) as stream:
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


def check_table(check: RecordCheck, table: pa.Table) -> int:
    """Check every record of ``table`` with ``check``; its row count."""
    rows = 0
    for batch in table.to_batches():
        check.batch(batch, rows)
        rows += batch.num_rows
    return rows
