"""Codecs of ``java.time``, ``java.sql``, ``java.util.Date`` and Flink's big-number serializers.

Each reads one value in the layout of Flink's serializer (Flink 2.3, ``flink-core``'s
``org.apache.flink.api.common.typeutils.base`` and ``api.java.typeutils.runtime``) and returns the
Python value of its statectl type (:mod:`statecore.serializers`):

================================  ==================  =========================================
Flink serializer                  statectl spec       bytes
================================  ==================  =========================================
``InstantSerializer``             ``timestamp[ns]``   int64 epoch seconds, int32 nanos
``LocalDateSerializer``           ``date32``          int32 year, int8 month, int8 day
``LocalTimeSerializer``           ``local_time``      int8 hour, minute, second, int32 nanos
``LocalDateTimeSerializer``       ``local_datetime``  the date's 6 bytes, the time's 7
``SqlDate/SqlTime/DateSerial.``   ``timestamp[ms]``   int64 epoch milliseconds
``SqlTimestampSerializer``        ``timestamp[ns]``   int64 epoch milliseconds, int32 nanos
``BigIntSerializer``              ``bigint``          int32 length + 4 (0 null, 1..3: 0, 1, 10),
                                                      then two's-complement big-endian bytes
``BigDecSerializer``              ``decimal``         the unscaled ``BigInteger``, int32 scale
================================  ==================  =========================================

Flink 1.20 writes the same snapshots (simple snapshots, version 3) and the same bytes
(``tests/test_flink_encoders.py`` runs Flink's own serializers of both).

Null markers are Flink's: ``Long.MIN_VALUE`` seconds with ``Integer.MIN_VALUE`` nanos (Instant),
``Integer.MIN_VALUE`` year (LocalDate), ``Byte.MIN_VALUE`` hour (LocalTime), ``Long.MIN_VALUE``
milliseconds (the ``java.util.Date`` family).
"""

from __future__ import annotations

import datetime
import decimal
import struct

from formats.flink.java.input import DataReader
from formats.flink.types.codec import Codec
from statecore.errors import UnsupportedFormatError
from statecore.hashing import (
    java_big_decimal_hash,
    java_big_integer_hash,
    java_instant_hash,
    java_local_date_hash,
    java_local_datetime_hash,
    java_local_time_hash,
    java_long_hash,
)
from statecore.serializers import decimal_parts
from statecore.values import (
    NANOS_PER_DAY,
    NANOS_PER_SECOND,
    Instant,
    LocalDateTime,
    LocalTime,
    civil_from_days,
    days_from_civil,
)

__all__ = ["MAX_BIG_INTEGER_BYTES", "TEMPORAL"]

LONG_MIN = -(1 << 63)
INT_MIN = -(1 << 31)
#: Nanoseconds an Arrow ``timestamp[ns]`` holds (int64: 1677-09-21 to 2262-04-11).
_NS_LOW, _NS_HIGH = -(1 << 63), (1 << 63) - 1

_QI = struct.Struct(">qi")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_DATE = struct.Struct(">ibb")
_TIME = struct.Struct(">bbbi")


def _room(r: DataReader, n: int) -> int:
    """The reader's position, once ``n`` more bytes are known to be there (not yet advanced).

    The readers check their value's whole width first, then decode it, and advance past it only
    once it is decoded (a corrupt value's error names the value's first byte).
    """
    pos = r.pos
    if pos + n > r.end:
        raise r.fail(f"truncated: {n} more bytes expected, {r.end - pos} left")
    return pos


def _instant_ns(r: DataReader, nanos: int, what: str) -> Instant:
    if not _NS_LOW <= nanos <= _NS_HIGH:
        raise UnsupportedFormatError(
            f"{r.where}: the {what} {Instant(nanos)} is outside what a timestamp[ns] holds "
            f"(1677-09-21 to 2262-04-11)")
    return Instant(nanos)


def _read_instant(r: DataReader) -> Instant | None:
    pos = _room(r, 12)
    seconds, nanos = _QI.unpack_from(r.data, pos)
    if not 0 <= nanos < NANOS_PER_SECOND:
        if seconds == LONG_MIN and nanos == INT_MIN:
            r.pos = pos + 12
            return None
        raise r.fail(f"an Instant's nanoseconds {nanos} outside 0..999999999")
    r.pos = pos + 12
    return _instant_ns(r, seconds * NANOS_PER_SECOND + nanos, "Instant")


def _date_parts(r: DataReader, pos: int) -> tuple[int, int, int] | None:
    year, month, day = _DATE.unpack_from(r.data, pos)
    if year == INT_MIN:
        return None
    if not 1 <= month <= 12 or not 1 <= day <= 31 or civil_from_days(
            days_from_civil(year, month, day)) != (year, month, day):
        raise r.fail(f"{year}-{month}-{day} is not a date")
    return year, month, day


def _read_local_date(r: DataReader) -> datetime.date | None:
    pos = _room(r, 6)
    parts = _date_parts(r, pos)
    r.pos = pos + 6
    if parts is None:
        return None
    if not 1 <= parts[0] <= 9999:
        raise UnsupportedFormatError(f"{r.where}: the LocalDate {parts[0]}-{parts[1]:02d}-"
                                     f"{parts[2]:02d} is outside the years 1..9999 statectl "
                                     f"represents")
    return datetime.date(*parts)


def _time_nanos(r: DataReader, pos: int) -> int | None:
    hour, minute, second, nano = (int(x) for x in _TIME.unpack_from(r.data, pos))
    if hour == -128:
        return None
    if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60
            and 0 <= nano < NANOS_PER_SECOND):
        raise r.fail(f"{hour}:{minute}:{second}.{nano} is not a time of day")
    return (hour * 3600 + minute * 60 + second) * NANOS_PER_SECOND + nano


def _read_local_time(r: DataReader) -> LocalTime | None:
    pos = _room(r, 7)
    nanos = _time_nanos(r, pos)
    r.pos = pos + 7
    return None if nanos is None else LocalTime(nanos)


def _read_local_datetime(r: DataReader) -> LocalDateTime | None:
    """``LocalDateTimeSerializer``: the date's bytes then the time's; null if either is."""
    pos = _room(r, 13)
    parts = _date_parts(r, pos)
    nanos = _time_nanos(r, pos + 6)
    r.pos = pos + 13
    if parts is None or nanos is None:
        return None
    value = days_from_civil(*parts) * NANOS_PER_DAY + nanos
    if not _NS_LOW <= value <= _NS_HIGH:
        raise UnsupportedFormatError(f"{r.where}: the LocalDateTime {LocalDateTime(value)} is "
                                     f"outside what a timestamp[ns] holds (1677 to 2262)")
    return LocalDateTime(value)


def _read_millis(r: DataReader) -> Instant | None:
    """``SqlDateSerializer``, ``SqlTimeSerializer``, ``DateSerializer``: epoch ms."""
    pos = _room(r, 8)
    r.pos = pos + 8
    millis = _Q.unpack_from(r.data, pos)[0]
    return None if millis == LONG_MIN else Instant(millis * 1_000_000)


def _read_sql_timestamp(r: DataReader) -> Instant | None:
    """``SqlTimestampSerializer``: ``getTime()`` (ms), ``getNanos()`` (of its second)."""
    pos = _room(r, 8)
    millis = _Q.unpack_from(r.data, pos)[0]
    _room(r, 12)  # null is Long.MIN_VALUE and an int 0: 12 bytes as well
    if millis == LONG_MIN:
        r.pos = pos + 12
        return None
    nanos = _I.unpack_from(r.data, pos + 8)[0]
    if not 0 <= nanos < NANOS_PER_SECOND:
        raise r.fail(f"a Timestamp's nanoseconds {nanos} outside 0..999999999")
    r.pos = pos + 12
    return _instant_ns(r, (millis // 1000) * NANOS_PER_SECOND + nanos, "Timestamp")


def _sql_timestamp_hash(value: Instant) -> int:
    """``java.sql.Timestamp.hashCode``: ``Date.hashCode`` of ``getTime()`` (ms incl. nanos)."""
    return java_long_hash(value.epoch_second * 1000 + value.nano // 1_000_000)


def _instant_hash(value: Instant) -> int:
    return java_instant_hash(value.epoch_second, value.nano)


def _date_hash(value: datetime.date) -> int:
    return java_local_date_hash(value.year, value.month, value.day)


def _datetime_hash(value: LocalDateTime) -> int:
    return java_local_datetime_hash(*civil_from_days(value.days), value.nano_of_day)


# -- BigInteger, BigDecimal ----------------------------------------------------------------


#: Largest ``BigInteger`` (bytes of its two's complement) statectl reads: its decimal text, the
#: ``bigint`` column's form, stays under Python's 4300-digit limit of int/str conversion.
MAX_BIG_INTEGER_BYTES = 1024


def _big_integer(r: DataReader) -> int | None:
    """``BigIntSerializer.readBigInteger``."""
    n = r.i32()
    if n < 4:
        if 0 <= n < 4:
            return (None, 0, 1, 10)[n]
        raise r.fail(f"impossible BigInteger length {n - 4}")
    if n == 4:
        raise r.fail("a BigInteger of no bytes")
    if n - 4 > MAX_BIG_INTEGER_BYTES:
        raise UnsupportedFormatError(f"{r.where}: a BigInteger of {n - 4} bytes, more than the "
                                     f"{MAX_BIG_INTEGER_BYTES} statectl reads")
    return int.from_bytes(r.raw(n - 4), "big", signed=True)


def _big_decimal(r: DataReader) -> decimal.Decimal | None:
    """``BigDecSerializer``: the unscaled value (null: the whole value), then the scale."""
    unscaled = _big_integer(r)
    if unscaled is None:
        return None
    scale = r.i32()
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return decimal.Decimal((int(unscaled < 0), digits, -scale))


#: Serializers (outer class name) -> codec. ``getLength()`` as Flink's.
TEMPORAL: dict[str, Codec] = {
    "InstantSerializer": Codec(_read_instant, "timestamp[ns]", 12, "Instant", _instant_hash),
    "LocalDateSerializer": Codec(_read_local_date, "date32", 6, "LocalDate", _date_hash),
    "LocalTimeSerializer": Codec(_read_local_time, "local_time", 7, "LocalTime",
                                 lambda v: java_local_time_hash(v.nano_of_day)),
    "LocalDateTimeSerializer": Codec(_read_local_datetime, "local_datetime", 13,
                                     "LocalDateTime", _datetime_hash),
    "SqlDateSerializer": Codec(_read_millis, "timestamp[ms]", 8, "java.sql.Date",
                               lambda v: java_long_hash(v.epoch_milli)),
    "SqlTimeSerializer": Codec(_read_millis, "timestamp[ms]", 8, "java.sql.Time",
                               lambda v: java_long_hash(v.epoch_milli)),
    "DateSerializer": Codec(_read_millis, "timestamp[ms]", 8, "java.util.Date",
                            lambda v: java_long_hash(v.epoch_milli)),
    "SqlTimestampSerializer": Codec(_read_sql_timestamp, "timestamp[ns]", 12,
                                    "java.sql.Timestamp", _sql_timestamp_hash),
    "BigIntSerializer": Codec(_big_integer, "bigint", -1, "BigInteger", java_big_integer_hash),
    "BigDecSerializer": Codec(_big_decimal, "decimal", -1, "BigDecimal",
                              lambda v: java_big_decimal_hash(*decimal_parts(v))),
}
