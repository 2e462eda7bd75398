"""Java's ``toString`` texts of the values Kryo writes: ``java.time`` and ``BigDecimal``.

Ports of ``LocalDate.toString``, ``LocalTime.toString``, ``ZoneOffset.getId``,
``Instant.toString`` (``DateTimeFormatter.ISO_INSTANT``), ``Duration.toString``,
``Period.toString`` and ``BigDecimal.toString``: the JSON form of such a value is its Java text,
shared by the Kryo 5 readers (:mod:`~formats.flink.types.kryo.java_time`) and the Kryo 2
``FieldSerializer`` ports (:mod:`~formats.flink.types.kryo.read`).
"""

from __future__ import annotations

from statecore.values import NANOS_PER_SECOND, civil_from_days

# ---------------------------------------------------------------- java.time text (toString)


def year_text(year: int, plus: bool) -> str:
    """The year as ``LocalDate.toString`` (``plus``) or ``YearMonth.toString`` writes it."""
    if abs(year) < 1000:
        return f"-{-year:04d}" if year < 0 else f"{year:04d}"
    return f"+{year}" if plus and year > 9999 else str(year)


def date_text(y: int, m: int, d: int) -> str:
    return f"{year_text(y, True)}-{m:02d}-{d:02d}"


def time_text(h: int, mi: int, s: int, n: int) -> str:
    """``LocalTime.toString``: seconds only when not zero, the fraction in groups of 3."""
    text = f"{h:02d}:{mi:02d}"
    if s or n:
        text += f":{s:02d}"
        if n:
            if n % 1_000_000 == 0:
                text += f".{n // 1_000_000:03d}"
            elif n % 1000 == 0:
                text += f".{n // 1000:06d}"
            else:
                text += f".{n:09d}"
    return text


def offset_text(seconds: int) -> str:
    """``ZoneOffset.getId``."""
    if seconds == 0:
        return "Z"
    a = abs(seconds)
    text = f"{'-' if seconds < 0 else '+'}{a // 3600:02d}:{a // 60 % 60:02d}"
    return text + (f":{a % 60:02d}" if a % 60 else "")


def instant_text(seconds: int, nanos: int) -> str:
    """``Instant.toString`` (``DateTimeFormatter.ISO_INSTANT``): seconds always written."""
    days, secs = divmod(seconds, 86400)
    y, m, d = civil_from_days(days)
    frac = ""
    if nanos:
        frac = (f".{nanos // 1_000_000:03d}" if nanos % 1_000_000 == 0 else
                f".{nanos // 1000:06d}" if nanos % 1000 == 0 else f".{nanos:09d}")
    return (f"{date_text(y, m, d)}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
            f"{frac}Z")


def _java_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def duration_text(seconds: int, nanos: int) -> str:
    """Port of ``Duration.toString``."""
    if seconds == 0 and nanos == 0:
        return "PT0S"
    total = seconds + 1 if seconds < 0 < nanos else seconds
    hours = _java_div(total, 3600)
    minutes = _java_div(total - hours * 3600, 60)
    secs = total - hours * 3600 - minutes * 60
    text = "PT"
    if hours:
        text += f"{hours}H"
    if minutes:
        text += f"{minutes}M"
    if secs == 0 and nanos == 0 and len(text) > 2:
        return text
    if seconds < 0 < nanos:
        text += "-0" if secs == 0 else str(secs)
    else:
        text += str(secs)
    if nanos:
        digits = str(2 * NANOS_PER_SECOND - nanos if seconds < 0 else nanos + NANOS_PER_SECOND)
        text += "." + digits[1:].rstrip("0")
    return text + "S"


def period_text(y: int, m: int, d: int) -> str:
    if y == m == d == 0:
        return "P0D"
    return "P" + (f"{y}Y" if y else "") + (f"{m}M" if m else "") + (f"{d}D" if d else "")


def java_decimal_text(unscaled: int, scale: int) -> str:
    """``BigDecimal.toString`` (scientific notation when the exponent is small)."""
    digits = str(abs(unscaled))
    sign = "-" if unscaled < 0 else ""
    adjusted = -scale + len(digits) - 1
    if scale >= 0 and adjusted >= -6:
        if scale == 0:
            return sign + digits
        if len(digits) > scale:
            return f"{sign}{digits[:-scale]}.{digits[-scale:]}"
        return f"{sign}0.{'0' * (scale - len(digits))}{digits}"
    mantissa = digits if len(digits) == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{sign}{mantissa}E{'+' if adjusted >= 0 else ''}{adjusted}"
