"""How values look in statectl's output: text for people, JSON-native for scripts."""

from __future__ import annotations

import datetime
import decimal
import json
import re
import uuid
from typing import Any

from formats.export import jsonable
from statecore.serializers import VOID_NAMESPACE
from statecore.state_map import StateEntry
from statecore.undecodable import Undecodable
from statecore.values import Instant, LocalDateTime, LocalTime

__all__ = ["format_duration", "format_epoch_ms", "format_size", "format_value", "to_json_value",
           "undecodable_text"]

_PLAIN_WORD = re.compile(r"[^\s\"'\[\]{}#,:@()]+")

def format_value(value: Any) -> str:
    """Render a key, namespace or state compactly: bare words plain, the rest as JSON.

    Tuples read as JSON arrays here (for people); JSON documents write them as objects
    (:func:`to_json_value`).
    """
    if value is VOID_NAMESPACE:
        return "VOID"
    if type(value) is Undecodable:
        return undecodable_text(value)
    if isinstance(value, str) and _PLAIN_WORD.fullmatch(value):
        try:
            json.loads(value)
        except ValueError:
            return value  # would read back as the same bare word
    if not isinstance(value, str) and _is_typed_scalar(value):
        return str(_readable(value))  # a date, time or decimal reads as itself: no quotes
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=_readable)
    except (TypeError, ValueError):
        return repr(value)


def _is_typed_scalar(value: Any) -> bool:
    return isinstance(value, Instant | LocalTime | LocalDateTime | decimal.Decimal
                      | datetime.date | uuid.UUID)


def format_epoch_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC (``2023-11-14T22:13:20.250Z``); out of range: as is."""
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")


_DURATION_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000),
                   ("ms", 1))


def format_duration(ms: int) -> str:
    """A duration in milliseconds for people: ``1 d 2 h``, ``30 min``, ``1.5 s``, ``250 ms``.

    The two largest units that are not zero (``90061000`` is ``1 d 1 h``: the rest dropped).
    """
    if ms < 0:
        return f"-{format_duration(-ms)}"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:g} s"
    parts: list[str] = []
    rest = ms
    for unit, size in _DURATION_UNITS:
        if rest >= size and len(parts) < 2:
            parts.append(f"{rest // size} {unit}")
            rest %= size
        elif parts:
            break
    return " ".join(parts)


def _readable(value: Any) -> Any:
    """Text for a value JSON has no form for: instants and times as ISO-8601, dates, decimals.

    Anything else is refused (``format_value`` then shows its ``repr``).
    """
    if isinstance(value, Instant | LocalTime | LocalDateTime | decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if type(value) is Undecodable:
        return undecodable_text(value)
    raise TypeError(type(value).__name__)


def undecodable_text(marker: Undecodable) -> str:
    """A short marker for a value statectl could not decode: its class, size and reason."""
    size = "" if marker.data is None else f", {len(marker.data)} bytes"
    reason = marker.reason if len(marker.reason) <= 120 else marker.reason[:117] + "..."
    what = "damaged" if marker.damaged else "undecodable"
    return f"<{what} {marker.class_name.rsplit('.', 1)[-1]}{size}: {reason}>"


def to_json_value(value: Any) -> Any:
    """A value as every JSON document holds it (docs/json.md, "Values").

    As ``export`` writes JSON (:func:`formats.export.jsonable`, strict: non-finite floats as
    strings), the void namespace as ``null``, a map entry as its key, namespace and state, and
    anything JSON has no form for as its ``repr``.
    """
    if value is None or value is VOID_NAMESPACE:
        return None
    if isinstance(value, StateEntry):
        return {"key": to_json_value(value.key), "namespace": to_json_value(value.namespace),
                "state": to_json_value(value.state)}
    return _leaves(jsonable(value))


def _leaves(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if value is VOID_NAMESPACE:
        return None
    if isinstance(value, list):
        return [_leaves(v) for v in value]
    if isinstance(value, dict):
        return {k: _leaves(v) for k, v in value.items()}
    return repr(value)


def format_size(count: int) -> str:
    """Bytes for people: ``512 B``, ``1.5 KiB``, ``3.2 MiB``, ``1.1 GiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count:,} B" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError(count)
