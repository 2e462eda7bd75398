"""Reading Java ``DataInput`` streams: big-endian numbers, ``readUTF`` and Flink's ``StringValue``.

Every read is bounds-checked: running past the end, a negative or absurd length, or malformed
modified UTF-8 raises :class:`~statecore.errors.CorruptCheckpointError` naming ``where`` (the
file being read) and the position, so a truncated or bit-flipped Flink file never produces a raw
``struct.error`` or ``IndexError`` and never allocates more than the bytes it was given.
"""

from __future__ import annotations

import struct
from typing import Any

from statecore.errors import CorruptCheckpointError

__all__ = ["DataReader"]

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")


class DataReader:
    """A cursor over bytes with the reads of ``java.io.DataInputStream``."""

    __slots__ = ("data", "pos", "end", "where")

    def __init__(self, data: bytes | bytearray | memoryview, where: str, pos: int = 0,
                 end: int | None = None) -> None:
        self.data = bytes(data) if not isinstance(data, bytes) else data
        self.pos = pos
        self.end = len(self.data) if end is None else min(end, len(self.data))
        self.where = where

    # -- errors ---------------------------------------------------------------------------

    def fail(self, message: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{self.where}: {message} (at byte {self.pos})")

    def need(self, n: int) -> int:
        """Check that ``n`` more bytes exist; the position where they start."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise self.fail(f"truncated: {n} more bytes expected, {self.end - pos} left")
        self.pos = pos + n
        return pos

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    # -- fixed width ----------------------------------------------------------------------

    def u8(self) -> int:
        return self.data[self.need(1)]

    def i8(self) -> int:
        value = self.data[self.need(1)]
        return value - 256 if value > 127 else value

    def boolean(self) -> bool:
        return self.data[self.need(1)] != 0

    def i16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise self.fail(f"truncated: 2 more bytes expected, {self.end - pos} left")
        self.pos = pos + 2
        return _I16.unpack_from(self.data, pos)[0]  # type: ignore[no-any-return]

    def u16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise self.fail(f"truncated: 2 more bytes expected, {self.end - pos} left")
        self.pos = pos + 2
        return _U16.unpack_from(self.data, pos)[0]  # type: ignore[no-any-return]

    def i32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise self.fail(f"truncated: 4 more bytes expected, {self.end - pos} left")
        self.pos = pos + 4
        return _I32.unpack_from(self.data, pos)[0]  # type: ignore[no-any-return]

    def i64(self) -> int:
        pos = self.pos
        if pos + 8 > self.end:
            raise self.fail(f"truncated: 8 more bytes expected, {self.end - pos} left")
        self.pos = pos + 8
        return _I64.unpack_from(self.data, pos)[0]  # type: ignore[no-any-return]

    def f32(self) -> float:
        pos = self.pos
        if pos + 4 > self.end:
            raise self.fail(f"truncated: 4 more bytes expected, {self.end - pos} left")
        self.pos = pos + 4
        return _F32.unpack_from(self.data, pos)[0]  # type: ignore[no-any-return]

    def f64(self) -> float:
        pos = self.pos
        if pos + 8 > self.end:
            raise self.fail(f"truncated: 8 more bytes expected, {self.end - pos} left")
        self.pos = pos + 8
        return _F64.unpack_from(self.data, pos)[0]  # type: ignore[no-any-return]

    def raw(self, n: int) -> bytes:
        start = self.need(n)
        return self.data[start:start + n]

    def count(self, what: str, element_bytes: int = 1, value: int | None = None) -> int:
        """A non-negative element count that fits in the bytes left (each >= element_bytes)."""
        n = self.i32() if value is None else value
        if n < 0 or n * element_bytes > self.remaining:
            raise self.fail(f"impossible {what} {n} ({self.remaining} bytes left)")
        return n

    def sized_bytes(self) -> bytes:
        """``int length`` then that many bytes (Flink's ``BytePrimitiveArraySerializer``)."""
        pos = self.pos
        if pos + 4 > self.end:
            raise self.fail(f"truncated: 4 more bytes expected, {self.end - pos} left")
        n = _I32.unpack_from(self.data, pos)[0]
        start = pos + 4
        if n < 0 or start + n > self.end:
            self.pos = start
            raise self.fail(f"byte array of {n} bytes with {self.end - start} left")
        self.pos = start + n
        return self.data[start:start + n]

    def byte_arrays(self, count: int | None = None, separator: int | None = None
                    ) -> list[bytes]:
        """Sized byte arrays back to back: ``count`` of them, or up to the end.

        With ``separator``, that byte stands between two (a canonical list's ``','``).
        """
        data, pos, end = self.data, self.pos, self.end
        out: list[bytes] = []
        while (pos < end) if count is None else (len(out) < count):
            if out and separator is not None:
                if pos >= end or data[pos] != separator:
                    self.pos = pos
                    raise self.fail(f"list elements not separated by {chr(separator)!r}")
                pos += 1
                if pos >= end and count is None:
                    break  # a trailing separator
            if pos + 4 > end:
                self.pos = pos
                raise self.fail(f"truncated: 4 more bytes expected, {end - pos} left")
            n = _I32.unpack_from(data, pos)[0]
            start = pos + 4
            pos = start + n
            if n < 0 or pos > end:
                self.pos = start
                raise self.fail(f"byte array of {n} bytes with {end - start} left")
            out.append(data[start:pos])
        self.pos = pos
        return out

    def fixed_array(self, code: str, size: int, n: int) -> list[Any]:
        """``n`` big-endian values of struct ``code`` (``size`` bytes each), back to back."""
        if n < 0 or n * size > self.end - self.pos:
            raise self.fail(f"impossible count {n} ({self.end - self.pos} bytes left)")
        start = self.pos
        self.pos = start + n * size
        return list(struct.unpack_from(f">{n}{code}", self.data, start))

    # -- strings --------------------------------------------------------------------------

    def utf(self) -> str:
        """``DataInput.readUTF``: an unsigned short byte length, then modified UTF-8."""
        n = self.u16()
        raw = self.raw(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return self._modified_utf8(raw)

    def _modified_utf8(self, raw: bytes) -> str:
        # Java's modified UTF-8: NUL as C0 80 and supplementary characters as surrogate pairs
        # (CESU-8). Decode to UTF-16 code units, then join surrogates.
        units: list[int] = []
        i, n = 0, len(raw)
        while i < n:
            b = raw[i]
            if b < 0x80:
                units.append(b)
                i += 1
            elif b >> 5 == 0b110 and i + 1 < n and raw[i + 1] >> 6 == 0b10:
                units.append(((b & 0x1F) << 6) | (raw[i + 1] & 0x3F))
                i += 2
            elif (b >> 4 == 0b1110 and i + 2 < n and raw[i + 1] >> 6 == 0b10
                  and raw[i + 2] >> 6 == 0b10):
                units.append(((b & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
                i += 3
            else:
                raise self.fail("malformed modified UTF-8 string")
        return utf16_units_to_str(units)

    def varint(self) -> int:
        """An unsigned varint of ``StringValue``: 7 bits per byte, low group first (<= 5 bytes)."""
        data, pos, end = self.data, self.pos, self.end
        result = shift = 0
        while True:
            if pos >= end:
                self.pos = pos
                raise self.fail("truncated varint")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 28:
                self.pos = pos
                raise self.fail("varint longer than 5 bytes")

    def string_value(self) -> str | None:
        """Flink's ``StringValue.readString`` (``StringSerializer``; reference §6.4).

        ``None`` for null.
        """
        data, pos = self.data, self.pos
        if pos < self.end and data[pos] < 0x80:  # a one-byte length: read inline
            length = data[pos]
            self.pos = pos + 1
        else:
            length = self.varint()
        if length == 0:
            return None
        length -= 1
        if length > self.remaining:
            raise self.fail(f"string of {length} characters with {self.remaining} bytes left")
        data, pos = self.data, self.pos
        chunk = data[pos:pos + length]
        if chunk.isascii():  # the common case: one byte per character
            self.pos = pos + length
            return chunk.decode("ascii")
        units = [0] * length
        for i in range(length):
            units[i] = self.varint()
        return utf16_units_to_str(units)


def utf16_units_to_str(units: list[int]) -> str:
    """Java's UTF-16 code units as a Python string; unpaired surrogates are kept as is."""
    try:
        return b"".join(u.to_bytes(2, "big") for u in units).decode("utf-16-be")
    except (UnicodeDecodeError, OverflowError):
        return "".join(chr(u) for u in units if u < 0x110000)
