"""The declared classes whose Kryo values are statectl's typed values (:data:`TYPED_SPECS`).

A ``KryoSerializer`` of ``String``, the wrappers, ``BigInteger``, ``BigDecimal``, ``UUID``,
``LocalDate``/``LocalTime``/``LocalDateTime``/``Instant``, ``java.util.Date`` and ``java.sql``'s
dates holds values of one statectl type (e.g. ``int64``, ``date32``, ``timestamp[ns]``); any
other declared class is ``json``. Used by :func:`~formats.flink.types.kryo.kryo_codec` and its
mirror :func:`~formats.flink.types.kryo.kryo_encoder`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from formats.flink.types.kryo.values import JavaStr
from statecore.errors import UnsupportedFormatError
from statecore.values import (
    NANOS_PER_DAY,
    NANOS_PER_SECOND,
    Instant,
    LocalDateTime,
    LocalTime,
    days_from_civil,
)

# ------------------------------------------------------------------------------ typed specs


def _typed_date(v: JavaStr) -> Any:
    import datetime
    y, m, d = v.parts
    if not 1 <= y <= 9999:
        raise UnsupportedFormatError(f"the LocalDate {v} is outside the years 1..9999 "
                                     f"statectl represents")
    return datetime.date(y, m, d)


def _nanos(v: JavaStr, value: int, spec: str) -> int:
    """``value`` (nanoseconds) where a 64-bit ``spec`` column holds it."""
    if not -(1 << 63) <= value < 1 << 63:
        raise UnsupportedFormatError(f"the {v.java_class} {v} is outside what a {spec} holds "
                                     f"(1677-09-21 to 2262-04-11)")
    return value


def _typed_local_datetime(v: JavaStr) -> LocalDateTime:
    y, mo, d, h, mi, s, n = v.parts
    return LocalDateTime(_nanos(v, days_from_civil(y, mo, d) * NANOS_PER_DAY
                                + ((h * 60 + mi) * 60 + s) * NANOS_PER_SECOND + n,
                                "local_datetime"))


def _typed_instant(v: JavaStr) -> Instant:
    seconds, nanos = v.parts
    return Instant(_nanos(v, seconds * NANOS_PER_SECOND + nanos, "timestamp[ns]"))


def _typed_millis(v: JavaStr) -> Instant:
    return Instant(_nanos(v, v.parts[0] * 1_000_000, "timestamp[ms]"))


#: Declared class -> (statectl spec, the Python value from the JSON form's value). Other
#: declared classes are ``json``.
TYPED_SPECS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "java.lang.String": ("string", str),
    "java.lang.Integer": ("int32", int), "java.lang.Long": ("int64", int),
    "java.lang.Short": ("int16", int), "java.lang.Byte": ("int8", int),
    "java.lang.Boolean": ("bool", bool), "java.lang.Float": ("float32", float),
    "java.lang.Double": ("float64", float), "java.lang.Character": ("char", str),
    "java.math.BigInteger": ("bigint", int),
    "java.math.BigDecimal": ("decimal", lambda v: v.parts[2]),
    "java.util.UUID": ("string", str),
    "java.time.LocalDate": ("date32", _typed_date),
    "java.time.LocalTime": ("local_time", lambda v: LocalTime(
        ((v.parts[0] * 60 + v.parts[1]) * 60 + v.parts[2]) * NANOS_PER_SECOND + v.parts[3])),
    "java.time.LocalDateTime": ("local_datetime", _typed_local_datetime),
    "java.time.Instant": ("timestamp[ns]", _typed_instant),
    "java.util.Date": ("timestamp[ms]", _typed_millis),
    "java.sql.Date": ("timestamp[ms]", _typed_millis),
    "java.sql.Time": ("timestamp[ms]", _typed_millis),
    "java.sql.Timestamp": ("timestamp[ns]", _typed_instant),
}
