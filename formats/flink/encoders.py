"""Writing values in Flink's byte layouts: the mirror of the codecs' readers.

:func:`encoder_for` builds, for a serializer snapshot, an :data:`Encoder` that appends one value
in the bytes the serializer writes -- for every serializer whose values
:func:`formats.flink.serializers.codec_for` decodes, so a decoded value encodes back to the same
bytes (tests check every fixture pair). ``RowData`` values keep the binary row they were read
from and are written back as it. A serializer statectl cannot decode has no encoder.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from formats.flink.javaout import string_value_bytes
from formats.flink.serializers import RowDataTuple, SerializerSnapshot
from statecore.errors import InvalidArgumentError

__all__ = ["Encoder", "encoder_for", "raw_encoder", "timer_key_encoder"]

#: Appends one value's bytes.
Encoder = Callable[[bytearray, Any], None]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_SIGN = -1 << 63


def _packer(packer: struct.Struct, kind: type) -> Encoder:
    pack = packer.pack

    def write(out: bytearray, value: Any) -> None:
        if type(value) is not kind and not (kind is float and type(value) is int):
            raise InvalidArgumentError(f"{value!r} is not a {kind.__name__}")
        out += pack(value)
    return write


def _string(out: bytearray, value: Any) -> None:
    if value is not None and type(value) is not str:
        raise InvalidArgumentError(f"{value!r} is not a string")
    out += string_value_bytes(value)


def _bool(out: bytearray, value: Any) -> None:
    if type(value) is not bool:
        raise InvalidArgumentError(f"{value!r} is not a boolean")
    out.append(1 if value else 0)


def _char(out: bytearray, value: Any) -> None:
    if type(value) is not str or len(value) != 1 or ord(value) > 0xFFFF:
        raise InvalidArgumentError(f"{value!r} is not a char (one UTF-16 code unit)")
    out += _U16.pack(ord(value))


def _bytes(out: bytearray, value: Any) -> None:
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not bytes")
    out += _I32.pack(len(value))
    out += value


def _void(out: bytearray, value: Any) -> None:
    out.append(0)


def _time_window(out: bytearray, value: Any) -> None:
    start, end = value
    out += _I64.pack(start)
    out += _I64.pack(end)


def _string_data(out: bytearray, value: Any) -> None:
    data = value.encode("utf-8")
    out += _I32.pack(len(data))
    out += data


def raw_encoder(out: bytearray, value: Any) -> None:
    """A value statectl kept as the bytes Flink delimited (an unknown serializer's): as is."""
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not the raw bytes of a value")
    out += value


_BASIC: dict[str, Encoder] = {
    "StringSerializer": _string,
    "IntSerializer": _packer(_I32, int),
    "LongSerializer": _packer(_I64, int),
    "ShortSerializer": _packer(_I16, int),
    "ByteSerializer": _packer(_I8, int),
    "BooleanSerializer": _bool,
    "FloatSerializer": _packer(_F32, float),
    "DoubleSerializer": _packer(_F64, float),
    "CharSerializer": _char,
    "BytePrimitiveArraySerializer": _bytes,
    "ByteArrayWrapperSerializer": _bytes,
    "VoidNamespaceSerializer": _void,
    "TimeWindow": _time_window,
    "StringDataSerializer": _string_data,
}


def encoder_for(snapshot: SerializerSnapshot) -> Encoder | None:
    """The encoder of a serializer snapshot, or ``None`` when statectl cannot write its values.

    Mirrors :func:`formats.flink.serializers.codec_for` case by case.
    """
    short = snapshot.short_name
    outer = short.split("$")[0]
    if outer in _BASIC:
        return _BASIC[outer]
    if short.startswith("RowDataSerializer$"):
        return _row_data
    nested = [encoder_for(n) for n in snapshot.nested]
    if any(e is None for e in nested):
        return None
    parts: list[Encoder] = [e for e in nested if e is not None]
    if short == "ListSerializerSnapshot" and len(parts) == 1:
        return _list(parts[0])
    if short == "MapSerializerSnapshot" and len(parts) == 2:
        return _map(parts[0], parts[1])
    if short.startswith("TtlStateFactory$TtlSerializerSnapshot") and len(parts) == 2:
        return _tuple(parts)
    if short.startswith("TupleSerializerSnapshot") and parts:
        return _tuple(parts)
    if short == "TimerSerializerSnapshot" and len(parts) == 2:
        return timer_key_encoder(parts[0], parts[1])
    if short.startswith("RowSerializer$") and parts:
        return _row(parts, snapshot.outer.get("legacy_mode", False))
    if short.startswith("ExternalSerializer$") and len(parts) == 1:
        return parts[0]
    return None


def _list(element: Encoder) -> Encoder:
    """``ListSerializer``: an int count, then the elements."""
    def write(out: bytearray, value: Any) -> None:
        out += _I32.pack(len(value))
        for e in value:
            element(out, e)
    return write


def _map(key: Encoder, value_encoder: Encoder) -> Encoder:
    """``MapSerializer``: an int count, then per entry the key, a null flag, the value."""
    def write(out: bytearray, value: Any) -> None:
        out += _I32.pack(len(value))
        for k, v in value.items():
            key(out, k)
            if v is None:
                out.append(1)
            else:
                out.append(0)
                value_encoder(out, v)
    return write


def _tuple(parts: list[Encoder]) -> Encoder:
    def write(out: bytearray, value: Any) -> None:
        if len(value) != len(parts):
            raise InvalidArgumentError(f"{value!r} has not {len(parts)} fields")
        for part, field in zip(parts, value, strict=True):
            part(out, field)
    return write


def timer_key_encoder(key: Encoder, namespace: Encoder) -> Encoder:
    """``TimerSerializer``: the timestamp with its sign bit flipped, the key, the namespace.

    The value is ``(timestamp, key, namespace)``, as the codec reads it.
    """
    def write(out: bytearray, value: Any) -> None:
        timestamp, k, ns = value
        out += _I64.pack(timestamp ^ _SIGN)  # MathUtils.flipSignBit
        key(out, k)
        namespace(out, ns)
    return write


def _row(parts: list[Encoder], legacy: bool) -> Encoder:
    """``RowSerializer``: a bit mask, then the non-null fields.

    The mask has two RowKind bits unless legacy (INSERT: 0), then a null bit per field, most
    significant first.
    """
    offset = 0 if legacy else 2
    mask_bytes = (len(parts) + offset + 7) // 8
    total = mask_bytes * 8

    def write(out: bytearray, value: Any) -> None:
        if len(value) != len(parts):
            raise InvalidArgumentError(f"{value!r} has not {len(parts)} fields")
        mask = 0
        for i, field in enumerate(value):
            if field is None:
                mask |= 1 << (total - 1 - offset - i)
        out += mask.to_bytes(mask_bytes, "big")
        for part, field in zip(parts, value, strict=True):
            if field is not None:
                part(out, field)
    return write


def _row_data(out: bytearray, value: Any) -> None:
    """``RowDataSerializer``: ``int size`` then the ``BinaryRowData`` the value was read from."""
    if not isinstance(value, RowDataTuple):
        raise InvalidArgumentError("a RowData value can only be written as the binary row it "
                                   "was read from")
    out += _I32.pack(len(value.binary))
    out += value.binary
