"""``java.time`` as Kryo 5 (Flink 2.x) writes it: reading Kryo 5's ``TimeSerializers``.

Ports of ``TimeSerializers`` (``LocalDateSerializer``, ``LocalTimeSerializer``,
``LocalDateTimeSerializer``, ``InstantSerializer``, ``DurationSerializer``,
``ZoneOffsetSerializer``, ``ZoneIdSerializer``, ``OffsetTimeSerializer``,
``OffsetDateTimeSerializer``, ``ZonedDateTimeSerializer``, ``YearSerializer``,
``YearMonthSerializer``, ``MonthDaySerializer``, ``PeriodSerializer``); a value is its Java
``toString`` text (:mod:`~formats.flink.types.kryo.text`) with its fields as ``parts``.

Kryo 2.24 (Flink 1.x) has no ``java.time`` serializers: its ``FieldSerializer`` writes the
JDK's fields, which nest objects; those ports are in :mod:`~formats.flink.types.kryo.read`
(they read their fields through Kryo's ``readObject``). The writers of both are in
:mod:`~formats.flink.types.kryo.write`.
"""

from __future__ import annotations

import datetime
import zoneinfo

from formats.flink.types.kryo.input import State, kryo_string, read_fixed, read_varint, read_varlong
from formats.flink.types.kryo.text import (
    date_text,
    duration_text,
    instant_text,
    offset_text,
    period_text,
    time_text,
    year_text,
)
from formats.flink.types.kryo.values import JavaStr, jstr
from statecore.values import NANOS_PER_SECOND, civil_from_days, days_from_civil

# -- java.time (Kryo 5's TimeSerializers)


def _local_date_parts(st: State) -> tuple[int, int, int]:
    r = st.r
    year = read_varint(r)
    month, day = r.i8(), r.i8()
    if not 1 <= month <= 12 or not 1 <= day <= 31 or civil_from_days(
            days_from_civil(year, month, day)) != (year, month, day):
        raise r.fail(f"{year}-{month}-{day} is not a date")
    return year, month, day


def _local_time_parts(st: State) -> tuple[int, int, int, int]:
    """``LocalTimeSerializer``: the trailing zero fields cut, the last written complemented."""
    r = st.r
    hour, minute, second, nano = r.i8(), 0, 0, 0
    if hour < 0:
        hour = ~hour
    else:
        minute = r.i8()
        if minute < 0:
            minute = ~minute
        else:
            second = r.i8()
            if second < 0:
                second = ~second
            else:
                nano = read_varint(r)
    if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60
            and 0 <= nano < NANOS_PER_SECOND):
        raise r.fail(f"{hour}:{minute}:{second}.{nano} is not a time of day")
    return hour, minute, second, nano


def _offset_seconds(st: State) -> int:
    """``ZoneOffsetSerializer``: quarter hours in a byte, or 127 and the seconds."""
    b = st.r.i8()
    seconds = read_fixed(st, "i", 4) if b == 127 else b * 900
    if abs(seconds) > 18 * 3600:
        raise st.r.fail(f"a zone offset of {seconds} s")
    return int(seconds)


def _zone_id(st: State) -> str:
    text = kryo_string(st.r)
    if not text:
        raise st.r.fail("a ZoneId without id")
    return text


def local_date(st: State, cls: str) -> JavaStr:
    p = _local_date_parts(st)
    return jstr(date_text(*p), cls, p)


def read_local_time(st: State, cls: str) -> JavaStr:
    p = _local_time_parts(st)
    return jstr(time_text(*p), cls, p)


def read_local_datetime(st: State, cls: str) -> JavaStr:
    d, t = _local_date_parts(st), _local_time_parts(st)
    return jstr(f"{date_text(*d)}T{time_text(*t)}", cls, d + t)


def read_instant(st: State, cls: str) -> JavaStr:
    seconds = read_varlong(st.r, False)
    nanos = read_varint(st.r)
    if not 0 <= nanos < NANOS_PER_SECOND:
        raise st.r.fail(f"an Instant's nanoseconds {nanos}")
    return jstr(instant_text(seconds, nanos), cls, (seconds, nanos))


def read_duration(st: State, cls: str) -> JavaStr:
    seconds = read_fixed(st, "q", 8)
    nanos = read_varint(st.r)
    if not 0 <= nanos < NANOS_PER_SECOND:
        raise st.r.fail(f"a Duration's nanoseconds {nanos}")
    return jstr(duration_text(seconds, nanos), cls, (seconds, nanos))


def zone_offset(st: State, cls: str) -> JavaStr:
    seconds = _offset_seconds(st)
    return jstr(offset_text(seconds), cls, (seconds,))


def zone_region(st: State, cls: str) -> JavaStr:
    zone = _zone_id(st)
    return jstr(zone, cls, (zone,))


def read_offset_time(st: State, cls: str) -> JavaStr:
    t = _local_time_parts(st)
    offset = _offset_seconds(st)
    return jstr(time_text(*t) + offset_text(offset), cls, (*t, offset))


def read_offset_datetime(st: State, cls: str) -> JavaStr:
    d, t = _local_date_parts(st), _local_time_parts(st)
    offset = _offset_seconds(st)
    return jstr(f"{date_text(*d)}T{time_text(*t)}{offset_text(offset)}", cls,
                 (*d, *t, offset))


def zoned_datetime(st: State, cls: str) -> JavaStr:
    """Kryo 5's ``ZonedDateTimeSerializer``: the local date and time, then the zone id.

    Shown as ``ZonedDateTime.toString``: the offset (which Kryo 5 does not write) is the
    zone's at that local time (``ZonedDateTime.of``; Python's ``zoneinfo``, the same IANA
    rules), then ``[zone]`` unless the zone is that offset.
    """
    d, t = _local_date_parts(st), _local_time_parts(st)
    zone = _zone_id(st)
    return jstr(f"{date_text(*d)}T{time_text(*t)}{_zone_suffix(d, t, str(zone))}", cls,
                 (*d, *t, zone))


def _zone_suffix(d: tuple[int, int, int], t: tuple[int, int, int, int], zone: str) -> str:
    """``ZonedDateTime.toString``'s end: the offset, then ``[zone]`` for a region.

    A gap (a local time the zone skips) is not resolved here: the offset before it is shown,
    where Java moves the time forward; a zone statectl's ``zoneinfo`` does not know shows no
    offset.
    """
    if zone == "Z" or zone[:1] in "+-":
        return zone
    try:
        when = datetime.datetime(*d, *t[:3], tzinfo=zoneinfo.ZoneInfo(zone))
        offset = when.utcoffset()
    except (ValueError, zoneinfo.ZoneInfoNotFoundError, OverflowError, OSError):
        return f"[{zone}]"
    seconds = 0 if offset is None else int(offset.total_seconds())
    return f"{offset_text(seconds)}[{zone}]"


def read_year(st: State, cls: str) -> JavaStr:
    year = read_varint(st.r)
    return jstr(str(year), cls, (year,))


def read_year_month(st: State, cls: str) -> JavaStr:
    year = read_varint(st.r)
    month = st.r.i8()
    if not 1 <= month <= 12:
        raise st.r.fail(f"month {month}")
    return jstr(f"{year_text(year, False)}-{month:02d}", cls, (year, month))


def read_month_day(st: State, cls: str) -> JavaStr:
    month, day = st.r.i8(), st.r.i8()
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        raise st.r.fail(f"--{month}-{day} is not a month-day")
    return jstr(f"--{month:02d}-{day:02d}", cls, (month, day))


def read_period(st: State, cls: str) -> JavaStr:
    p = (read_varint(st.r), read_varint(st.r), read_varint(st.r))
    return jstr(period_text(*p), cls, p)
