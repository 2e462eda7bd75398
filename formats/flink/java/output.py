"""Writing Java ``DataOutput`` streams: big-endian numbers, ``writeUTF`` and ``StringValue``.

The mirror of :mod:`formats.flink.java.input`: every write appends to one ``bytearray``; what the
reader reads back is exactly what was written (tests check both ways).
"""

from __future__ import annotations

import struct

from statecore.errors import InvalidArgumentError

__all__ = ["DataWriter", "string_value_bytes", "utf_bytes"]

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")


class DataWriter:
    """Appends the writes of ``java.io.DataOutputStream`` to :attr:`out`."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def __len__(self) -> int:
        return len(self.out)

    def getvalue(self) -> bytes:
        return bytes(self.out)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.out += data

    def u8(self, value: int) -> None:
        self.out.append(value & 0xFF)

    def i8(self, value: int) -> None:
        self.out.append(value & 0xFF)

    def boolean(self, value: bool) -> None:
        self.out.append(1 if value else 0)

    def i16(self, value: int) -> None:
        self.out += _I16.pack(value)

    def u16(self, value: int) -> None:
        self.out += _U16.pack(value)

    def i32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def i64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def f32(self, value: float) -> None:
        self.out += _F32.pack(value)

    def f64(self, value: float) -> None:
        self.out += _F64.pack(value)

    def utf(self, text: str) -> None:
        """``DataOutput.writeUTF``: an unsigned short byte length, then modified UTF-8."""
        self.out += utf_bytes(text)

    def sized_bytes(self, data: bytes) -> None:
        """``int length`` then the bytes (``BytePrimitiveArraySerializer``)."""
        self.out += _I32.pack(len(data))
        self.out += data

    def string_value(self, text: str | None) -> None:
        """Flink's ``StringValue.writeString`` (``StringSerializer``; reference §6.4)."""
        self.out += string_value_bytes(text)


def utf_bytes(text: str) -> bytes:
    """``writeUTF``'s bytes: an unsigned short length, then modified UTF-8.

    NUL is ``C0 80``; a supplementary character is its surrogate pair, three bytes each.
    """
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for i in range(0, len(units), 2):
        unit = units[i] << 8 | units[i + 1]
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | unit >> 6, 0x80 | unit & 0x3F))
        else:
            out += bytes((0xE0 | unit >> 12, 0x80 | unit >> 6 & 0x3F, 0x80 | unit & 0x3F))
    if len(out) > 0xFFFF:
        raise InvalidArgumentError(f"a string of {len(out)} bytes is too long for writeUTF")
    return _U16.pack(len(out)) + bytes(out)


def _varint(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def string_value_bytes(text: str | None) -> bytes:
    """``StringValue.writeString``: ``len + 1`` as a varint (0: null), then UTF-16 varints.

    Each UTF-16 code unit is a varint of 7 bits per byte, low group first.
    """
    if text is None:
        return b"\x00"
    if text.isascii() and len(text) < 0x7F:  # the common case: one byte per character
        return bytes((len(text) + 1,)) + text.encode("ascii")
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    _varint(len(units) // 2 + 1, out)
    for i in range(0, len(units), 2):
        _varint(units[i] << 8 | units[i + 1], out)
    return bytes(out)
