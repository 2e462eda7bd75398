r"""A JSON Lines key's numbers read as their text, as written (``build --key-type string``).

pyarrow's JSON reader has no way to read a number as text: a column of numbers is int64 or
double, and a string column holding a number is refused. A job keyed by numeric-looking
String ids (``{"user": 594}``, ``{"user": 1e3}``) needs the text of each number, exactly as
the file has it: :class:`NumbersAsText` is a file object that hands pyarrow the file's bytes
with the key's numbers turned into JSON strings of their text (``{"user": 594}`` becomes
``{"user": "594"}``, ``1.0`` stays ``"1.0"``, ``1e3`` stays ``"1e3"``, ``-0`` stays
``"-0"``). Nothing else of a line changes, nor the number of lines (the positions and bad
records of :mod:`formats.inputs.bad_records` still hold).

Only lines that may hold the key with a number (a quick byte search for its name followed by a
colon and a digit or minus sign, or any ``\u`` escape) are parsed, with the ``json`` module's
own scanners; other chunks of lines pass as they are.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import BinaryIO

from formats.inputs.line_streams import WholeLines

__all__ = ["NumbersAsText", "quote_number"]

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
#: A JSON number (RFC 8259), not Python's extensions (NaN, Infinity)
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def quote_number(line: str, key: str) -> str:
    """``line`` (one JSON object) with the number values of member ``key`` as JSON strings.

    The text of each number is kept as written. A line that is no JSON object, or whose
    member ``key`` is not a number, is returned as it is (pyarrow's reader judges it).
    """
    try:
        end = _SPACE.match(line, 0).end()  # type: ignore[union-attr]
        if line[end:end + 1] != "{":
            return line
        pieces, done = [], 0
        at = _SPACE.match(line, end + 1).end()  # type: ignore[union-attr]
        if line[at:at + 1] == "}":
            return line
        while True:
            if line[at:at + 1] != '"':
                return line
            name, at = scanstring(line, at + 1)
            at = _SPACE.match(line, at).end()  # type: ignore[union-attr]
            if line[at:at + 1] != ":":
                return line
            start = _SPACE.match(line, at + 1).end()  # type: ignore[union-attr]
            value, at = _DECODER.raw_decode(line, start)
            if (name == key and isinstance(value, int | float) and not isinstance(value, bool)
                    and _NUMBER.fullmatch(line, start, at)):
                pieces += [line[done:start], '"', line[start:at], '"']
                done = at
            at = _SPACE.match(line, at).end()  # type: ignore[union-attr]
            if line[at:at + 1] == "}":
                break
            if line[at:at + 1] != ",":
                return line
            at = _SPACE.match(line, at + 1).end()  # type: ignore[union-attr]
    except ValueError:  # not JSON: pyarrow's reader says what is wrong
        return line
    return "".join(pieces) + line[done:] if pieces else line


class NumbersAsText(WholeLines):
    """A JSON Lines file's bytes with the numbers of member ``key`` as strings of their text.

    A file object pyarrow's readers take (see the module doc); closing closes ``stream``.
    """

    def __init__(self, stream: BinaryIO, key: str) -> None:
        super().__init__(stream)
        self._key = key
        name = re.escape(json.dumps(key).encode())
        self._maybe = re.compile(name + rb"[ \t\r]*:[ \t\r]*[-0-9]|\\u")

    def take(self, complete: bytes) -> None:
        if self._maybe.search(complete) is None:
            self._out += complete
            return
        lines = complete.split(b"\n")
        for i, raw in enumerate(lines):
            if self._maybe.search(raw) is not None:
                try:
                    raw = quote_number(raw.decode("utf-8"), self._key).encode("utf-8")
                except UnicodeDecodeError:
                    pass  # not UTF-8: refused or left out as such (formats.inputs.bad_records)
            self._out += raw
            if i < len(lines) - 1:
                self._out += b"\n"
