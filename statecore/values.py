"""Values of the Java time types that Python's ``datetime`` cannot hold exactly.

``java.time.Instant``, ``LocalTime`` and ``LocalDateTime`` have nanosecond precision; Python's
``datetime`` and ``time`` stop at microseconds, so decoding Flink state into them would lose
digits. These small immutable classes hold the exact value as an integer count of nanoseconds,
compare and hash by it, and print the ISO-8601 text Java prints. ``java.time.LocalDate`` is a
Python :class:`datetime.date` (exact for years 1..9999, the range statectl represents).

The type specs that use them (:mod:`statecore.serializers`): ``timestamp[ms|us|ns]`` ->
:class:`Instant`, ``local_time`` -> :class:`LocalTime`, ``local_datetime`` ->
:class:`LocalDateTime`, ``date32`` -> :class:`datetime.date`.

:class:`TimeWindow` is Flink's window namespace ``[start, end)``: a ``tuple<int64,int64>``
that knows it is a window of times, so output can show it as one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["NANOS_PER_DAY", "NANOS_PER_SECOND", "Instant", "LocalDateTime", "LocalTime",
           "TimeWindow", "civil_from_days", "days_from_civil"]

NANOS_PER_SECOND = 1_000_000_000
NANOS_PER_DAY = 86_400 * NANOS_PER_SECOND


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year; exact integer math)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """``(year, month, day)`` of a day count since 1970-01-01 (the inverse of the above)."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _fraction(nanos: int) -> str:
    """Java's ISO fraction: none, or 3, 6 or 9 digits (as ``DateTimeFormatter.ISO_*``)."""
    if not nanos:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1000 == 0:
        return f".{nanos // 1000:06d}"
    return f".{nanos:09d}"


def _date_text(days: int) -> str:
    year, month, day = civil_from_days(days)
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    return f"{shown}-{month:02d}-{day:02d}"


def _time_text(nano_of_day: int) -> str:
    seconds, nanos = divmod(nano_of_day, NANOS_PER_SECOND)
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}{_fraction(nanos)}"


_DATE = r"([+-]?\d{4,9})-(\d{2})-(\d{2})"
_TIME = r"(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?"
_INSTANT_TEXT = re.compile(_DATE + "[T ]" + _TIME + r"(?:Z|\+00:?00)?")
_LOCAL_DATETIME_TEXT = re.compile(_DATE + "[T ]" + _TIME)
_LOCAL_TIME_TEXT = re.compile(_TIME)


def _parse_time(groups: tuple[str | None, ...], text: str) -> int:
    hours, minutes = int(groups[0] or 0), int(groups[1] or 0)
    seconds = int(groups[2] or 0)
    nanos = int((groups[3] or "").ljust(9, "0") or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        raise ValueError(f"{text!r} is not a time of day")
    return (hours * 3600 + minutes * 60 + seconds) * NANOS_PER_SECOND + nanos


def _parse_date(groups: tuple[str | None, ...], text: str) -> int:
    year, month, day = int(groups[0] or 0), int(groups[1] or 0), int(groups[2] or 0)
    days = days_from_civil(year, month, day)
    if not 1 <= month <= 12 or civil_from_days(days) != (year, month, day):
        raise ValueError(f"{text!r} is not a date")
    return days


@dataclass(frozen=True, order=True, slots=True)
class Instant:
    """``java.time.Instant``: a point on the UTC time line, in nanoseconds since the epoch.

    ``str()`` is Java's ``Instant.toString()`` (``2023-11-14T22:13:20Z``, with 3, 6 or 9
    fraction digits when there is a fraction).
    """

    epoch_nanos: int

    @classmethod
    def of_epoch_second(cls, seconds: int, nanos: int = 0) -> Instant:
        return cls(seconds * NANOS_PER_SECOND + nanos)

    @classmethod
    def of_epoch_milli(cls, millis: int) -> Instant:
        return cls(millis * 1_000_000)

    @classmethod
    def parse(cls, text: str) -> Instant:
        """An ISO-8601 UTC instant (``2023-11-14T22:13:20.5Z``); ``ValueError`` if not one."""
        match = _INSTANT_TEXT.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not an ISO-8601 instant (YYYY-MM-DDTHH:MM:SS[.f]Z)")
        groups = match.groups()
        return cls(_parse_date(groups[:3], text) * NANOS_PER_DAY + _parse_time(groups[3:], text))

    @property
    def epoch_second(self) -> int:
        return self.epoch_nanos // NANOS_PER_SECOND

    @property
    def nano(self) -> int:
        """The nanosecond of the second, ``0..999_999_999`` (``Instant.getNano``)."""
        return self.epoch_nanos % NANOS_PER_SECOND

    @property
    def epoch_milli(self) -> int:
        """``Instant.toEpochMilli``: milliseconds, rounded towards negative infinity."""
        return self.epoch_nanos // 1_000_000

    def __str__(self) -> str:
        days, nanos = divmod(self.epoch_nanos, NANOS_PER_DAY)
        return f"{_date_text(days)}T{_time_text(nanos)}Z"


@dataclass(frozen=True, order=True, slots=True)
class LocalTime:
    """``java.time.LocalTime``: a time of day without a zone, in nanoseconds since midnight."""

    nano_of_day: int

    def __post_init__(self) -> None:
        if not 0 <= self.nano_of_day < NANOS_PER_DAY:
            raise ValueError(f"{self.nano_of_day} nanoseconds is not a time of day")

    @classmethod
    def parse(cls, text: str) -> LocalTime:
        """``HH:MM[:SS[.fraction]]``; ``ValueError`` if not a time of day."""
        match = _LOCAL_TIME_TEXT.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a time of day (HH:MM[:SS[.f]])")
        return cls(_parse_time(match.groups(), text))

    def __str__(self) -> str:
        return _time_text(self.nano_of_day)


@dataclass(frozen=True, order=True, slots=True)
class LocalDateTime:
    """``java.time.LocalDateTime``: a date and time without a zone.

    Held as nanoseconds since 1970-01-01T00:00 on the same zone-less time line.
    """

    epoch_nanos: int

    @classmethod
    def parse(cls, text: str) -> LocalDateTime:
        """``YYYY-MM-DDTHH:MM[:SS[.fraction]]``; ``ValueError`` if not one."""
        match = _LOCAL_DATETIME_TEXT.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a local date-time (YYYY-MM-DDTHH:MM[:SS[.f]])")
        groups = match.groups()
        return cls(_parse_date(groups[:3], text) * NANOS_PER_DAY + _parse_time(groups[3:], text))

    @property
    def days(self) -> int:
        """The date as days since 1970-01-01."""
        return self.epoch_nanos // NANOS_PER_DAY

    @property
    def nano_of_day(self) -> int:
        return self.epoch_nanos % NANOS_PER_DAY

    def __str__(self) -> str:
        return f"{_date_text(self.days)}T{_time_text(self.nano_of_day)}"


class TimeWindow(NamedTuple):
    """Flink's ``TimeWindow``: the window ``[start, end)``, both in epoch milliseconds.

    The namespace of Flink's time windows as statectl decodes it (``TimeWindow.Serializer``:
    ``long start``, ``long end``). It *is* the tuple ``(start, end)`` of the ``tuple<int64,int64>``
    spec that window namespaces map to: equal to it, the same builtin hash, sorted with it,
    unpacked, pickled and written back (Arrow struct ``f0, f1``; JSON ``[start, end]``; Flink's
    bytes) exactly as it. Its own type only tells output that the two numbers are times.
    ``start <= end`` is Flink's contract, not checked here: a snapshot is untrusted input.
    """

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        """``TimeWindow.maxTimestamp()``: ``end - 1``, when the end-of-window timer fires."""
        return self.end - 1
