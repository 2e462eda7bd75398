"""Kryo's ``Input``: varints, strings, fixed-width numbers; one value's reading state.

Ports of ``Input.readVarInt``, ``Input.readVarLong``, ``Input.readVarIntFlag`` and
``Input.readString`` (Kryo 2.24 and Kryo 5 alike); fixed-width numbers are little-endian in
Kryo 5 and big-endian in Kryo 2 (:func:`read_fixed`). :class:`State` holds a top-level value's class
names and reference ids, which Kryo resets after each ``writeClassAndObject``.
"""

from __future__ import annotations

import struct
from typing import Any

from formats.flink.java.input import DataReader, utf16_units_to_str
from formats.flink.types.kryo.registrations import KryoRegistrations


class State:
    """One top-level value's reading: its class names and reference ids (Kryo resets both)."""

    __slots__ = ("r", "reg", "names", "refs", "depth", "le", "enums")

    def __init__(self, r: DataReader, reg: KryoRegistrations) -> None:
        self.r = r
        self.reg = reg
        self.names: list[str] = []
        self.refs: list[Any] = []
        self.depth = 0
        self.le = reg.major >= 5
        self.enums = reg.enums  # grows by the enum classes EnumSets name


def read_varint(r: DataReader) -> int:
    """``Input.readVarInt(true)``: 7 bits per byte, low group first, at most 5 bytes."""
    value = r.varint()
    return value - (1 << 32) if value >= 1 << 31 else value


def zigzag_int(r: DataReader) -> int:
    v = r.varint() & 0xFFFFFFFF
    return (v >> 1) ^ -(v & 1)


def read_varlong(r: DataReader, zigzag: bool) -> int:
    """``Input.readVarLong``: 7 bits per byte, the ninth byte whole (Kryo 2 and 5)."""
    data, pos, end = r.data, r.pos, r.end
    result = 0
    for shift in range(0, 63, 7):
        if pos >= end:
            r.pos = pos
            raise r.fail("truncated varlong")
        b = data[pos]
        pos += 1
        if shift == 56:
            result |= b << 56
            break
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
    r.pos = pos
    result &= (1 << 64) - 1
    if zigzag:
        return (result >> 1) ^ -(result & 1)
    return result - (1 << 64) if result >= 1 << 63 else result


def read_var_flag(r: DataReader) -> tuple[bool, int]:
    """``Input.readVarIntFlag``: bit 8 of the first byte a flag, bit 7 "more", 6 bits value."""
    start = r.need(1)
    b = r.data[start]
    result = b & 0x3F
    if b & 0x40:
        shift = 6
        for _ in range(4):
            c = r.data[r.need(1)]
            result |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                break
    return bool(b & 0x80), result & 0xFFFFFFFF


def kryo_string(r: DataReader) -> str | None:
    """``Input.readString``: a Kryo string, ``None`` for null.

    ASCII with the last byte's bit 8 set, or a char count + 1 (0: null) with bit 8 of the first
    byte set, then each UTF-16 unit in 1 to 3 bytes.
    """
    data, end = r.data, r.end
    start = r.pos
    if start >= end:
        raise r.fail("truncated Kryo string")
    if not data[start] & 0x80:  # ASCII
        pos = start
        while pos < end and not data[pos] & 0x80:
            pos += 1
        if pos >= end:
            raise r.fail("truncated Kryo ASCII string")
        r.pos = pos + 1
        return (data[start:pos] + bytes([data[pos] & 0x7F])).decode("ascii")
    _flag, count = read_var_flag(r)
    if count == 0:
        return None
    count -= 1
    if count > r.remaining:
        raise r.fail(f"impossible Kryo string of {count} characters ({r.remaining} bytes left)")
    pos = r.pos
    units = [0] * count
    for i in range(count):
        if pos >= end:
            r.pos = pos
            raise r.fail("truncated Kryo string")
        b = data[pos]
        top = b >> 4
        if top < 8:
            units[i] = b
            pos += 1
        elif top in (12, 13) and pos + 1 < end:
            units[i] = (b & 0x1F) << 6 | data[pos + 1] & 0x3F
            pos += 2
        elif top == 14 and pos + 2 < end:
            units[i] = (b & 0x0F) << 12 | (data[pos + 1] & 0x3F) << 6 | data[pos + 2] & 0x3F
            pos += 3
        else:
            r.pos = pos
            raise r.fail(f"bad byte {b:#x} in a Kryo string")
    r.pos = pos
    if all(u < 0x80 for u in units):
        return bytes(units).decode("ascii")
    return utf16_units_to_str(units)


TWO_LONGS = struct.Struct("<qq")
_STRUCTS = {(le, code): struct.Struct(("<" if le else ">") + code)
            for le in (True, False) for code in "bhHiqfd"}


def read_fixed(st: State, code: str, size: int) -> Any:
    """A fixed-width number: little-endian in Kryo 5, big-endian in Kryo 2."""
    r = st.r
    return _STRUCTS[st.le, code].unpack_from(r.data, r.need(size))[0]
