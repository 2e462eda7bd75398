"""Reading Kryo's serializers of single values (no nested objects).

Numbers, strings, ``BigInteger``, ``BigDecimal``, ``java.util.Date`` and ``java.sql``'s dates,
``UUID``, ``Currency``/``URI`` and enums.

Ports of ``DefaultSerializers`` (``IntSerializer`` .. ``StringSerializer``,
``BigIntegerSerializer``, ``BigDecimalSerializer``, ``DateSerializer``, ``EnumSerializer``,
``CurrencySerializer``, ``URISerializer``), Kryo 5's ``TimestampSerializer`` and
``UUIDSerializer`` and chill's (Flink 1.x's registrar) ``Timestamp`` and ``UUID`` serializers.
The mirrors are in :mod:`~formats.flink.types.kryo.write`.
"""

from __future__ import annotations

import decimal
from typing import Any

from formats.flink.java.input import utf16_units_to_str
from formats.flink.types.kryo.input import (
    TWO_LONGS,
    State,
    kryo_string,
    read_fixed,
    read_varlong,
    zigzag_int,
)
from formats.flink.types.kryo.text import instant_text, java_decimal_text
from formats.flink.types.kryo.values import JavaFloat, JavaInt, JavaStr, jint, jstr
from statecore.values import NANOS_PER_SECOND

# -- scalars


def read_int(st: State, cls: str) -> int:
    return zigzag_int(st.r)


def read_long(st: State, cls: str) -> JavaInt:
    return jint(read_varlong(st.r, True), cls)


def read_short(st: State, cls: str) -> JavaInt:
    return jint(read_fixed(st, "h", 2), cls)


def read_byte(st: State, cls: str) -> JavaInt:
    return jint(st.r.i8(), cls)


def read_char(st: State, cls: str) -> JavaStr:
    return jstr(utf16_units_to_str([read_fixed(st, "H", 2)]), cls)


def read_float(st: State, cls: str) -> JavaFloat:
    v = JavaFloat(read_fixed(st, "f", 4))
    v.java_class = cls
    return v


def read_double(st: State, cls: str) -> float:
    return float(read_fixed(st, "d", 8))


def read_boolean(st: State, cls: str) -> bool:
    return st.r.u8() != 0


def read_string(st: State, cls: str) -> JavaStr | None:
    text = kryo_string(st.r)
    return None if text is None else jstr(text, cls)


def big_integer(st: State, cls: str) -> JavaInt | None:
    """``DefaultSerializers.BigIntegerSerializer``: length + 1, two's complement big-endian."""
    r = st.r
    n = r.varint()
    if n == 0:
        return None
    raw = r.raw(n - 1)
    return jint(int.from_bytes(raw, "big", signed=True) if raw else 0, cls)


def big_decimal(st: State, cls: str) -> JavaStr | None:
    """``BigDecimalSerializer``: the unscaled value's bytes, then the scale.

    The unscaled value as ``BigInteger.toByteArray`` (length + 1 first), the scale a zig-zag
    varint.
    """
    r = st.r
    n = r.varint()
    if n == 0:
        return None
    raw = r.raw(n - 1)
    unscaled = int.from_bytes(raw, "big", signed=True) if raw else 0
    scale = zigzag_int(r)
    value = decimal.Decimal((int(unscaled < 0), tuple(map(int, str(abs(unscaled)))), -scale))
    return jstr(java_decimal_text(unscaled, scale), cls, (unscaled, scale, value))


def read_date(st: State, cls: str) -> JavaStr:
    """``DefaultSerializers.DateSerializer``: the milliseconds, a varint (no zig-zag)."""
    millis = read_varlong(st.r, False)
    seconds, ms = divmod(millis, 1000)
    return jstr(instant_text(seconds, ms * 1_000_000), cls, (millis,))


def read_timestamp(st: State, cls: str) -> JavaStr:
    """``java.sql.Timestamp``: milliseconds, then the nanoseconds (varints).

    Kryo 5's ``TimestampSerializer`` writes the whole seconds' milliseconds, chill's (Flink
    1.x) ``getTime()``.
    """
    r = st.r
    millis = read_varlong(r, False)
    nanos = r.varint()
    if nanos >= NANOS_PER_SECOND:
        raise r.fail(f"a Timestamp's nanoseconds {nanos}")
    seconds = millis // 1000  # Kryo 5: whole seconds' millis; chill: floorDiv drops the rest
    return jstr(instant_text(seconds, nanos), cls, (seconds, nanos))


def uuid(st: State, cls: str) -> JavaStr:
    """Kryo 5 ``UUIDSerializer``: two longs; chill's (Flink 1.x): two zig-zag varlongs."""
    if st.le:
        r = st.r
        msb, lsb = TWO_LONGS.unpack_from(r.data, r.need(16))
    else:
        msb, lsb = read_varlong(st.r, True), read_varlong(st.r, True)
    h = f"{(msb & (1 << 64) - 1) << 64 | lsb & (1 << 64) - 1:032x}"
    return jstr(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}", cls, (msb, lsb))


def text_of(st: State, cls: str) -> JavaStr | None:
    """``CurrencySerializer``, ``URISerializer``: a Kryo string."""
    text = kryo_string(st.r)
    return None if text is None else jstr(text, cls)


def read_enum(st: State, cls: str) -> dict[str, Any] | None:
    """``DefaultSerializers.EnumSerializer``: ordinal + 1 (0: null)."""
    n = st.r.varint()
    return None if n == 0 else {"enum": cls, "ordinal": n - 1}
