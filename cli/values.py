"""How values look in statectl's output: text for people, JSON-native for scripts."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
import uuid
from typing import Any

from statecore.serializers import VOID_NAMESPACE
from statecore.state_map import StateEntry
from statecore.undecodable import Undecodable
from statecore.values import Instant, LocalDateTime, LocalTime, TimeWindow

__all__ = ["BYTES_SHOWN", "TIMER_STATE_PREFIX", "format_bytes", "format_duration",
           "format_epoch_ms", "format_size",
           "format_value", "format_window", "shown_value", "to_json_value",
           "undecodable_text"]

_PLAIN_WORD = re.compile(r"[^\s\"'\[\]{}#,:@()]+")
#: A string of this form would read as bytes (see :func:`format_bytes`): it is quoted.
_BYTES_LIKE = re.compile(r"0[xX][0-9a-fA-F]*")
#: Bytes shown in full in text; longer ones show their first ones and their length.
BYTES_SHOWN = 32


#: The names of Flink's timer states (``_timer_state/event_window-timers``): their values are
#: the timers' timestamps (epoch ms).
TIMER_STATE_PREFIX = "_timer_state/"


def shown_value(state: str, value: Any) -> Any:
    """A state's value as text shows it.

    A timer state's timestamps are instants (ISO times, as every other timestamp in text);
    JSON keeps them as epoch ms.
    """
    if state.startswith(TIMER_STATE_PREFIX) and isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        try:
            return [Instant.of_epoch_milli(v) for v in value]
        except (OverflowError, ValueError):
            return value
    return value


def format_value(value: Any, *, indent: int | None = None) -> str:
    """Render a key, namespace or state for people: one line (``indent``: a block of lines).

    One quoting rule: quotes mark strings, and only strings. A string is JSON-quoted, except a
    key, namespace or value that is a string on its own and one bare word that reads as
    nothing else (``ACTIVE``, ``user-1``; but ``"42"``, ``"true"``, ``"0x1f"``, ``"two
    words"``). Nothing else is ever quoted, at any depth: numbers (``NaN``, ``Infinity``),
    ``true``, ``false``, ``null``, instants, dates, times, decimals and UUIDs as their ISO or
    Java text, bytes as hex (:func:`format_bytes`), a Flink window as ``[start, end)`` in ISO
    times (:func:`format_window`), the void namespace as ``VOID``, a value statectl could not
    decode as its marker (:func:`undecodable_text`).

    Lists, tuples (Flink tuples, rows) and sets (sorted) are ``[a, b]``; maps and POJOs
    ``{"key": value}``, their keys by the same rule (a ``map<int64,...>`` reads ``{1: 2}``).
    JSON documents write values otherwise (:func:`to_json_value`: bytes base64, windows
    ``[start, end]`` in epoch ms).

    ``indent``: lists and maps over several lines, each element on its own line indented by
    that many spaces a level (as ``json.dumps(indent=...)`` lays them out).
    """
    if indent is not None:
        return _block(value, indent, 0)
    if isinstance(value, str):
        if _PLAIN_WORD.fullmatch(value) and not _BYTES_LIKE.fullmatch(value):
            try:
                json.loads(value)
            except ValueError:
                return value  # would read back as the same bare word
        return json.dumps(value, ensure_ascii=False)
    return _text(value)


def _text(value: Any) -> str:
    """A value as :func:`format_value` writes it inside a list, tuple or map."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)  # what JSON writes: 1.5, 1e+100, -0.0
    if value is VOID_NAMESPACE:
        return "VOID"
    if isinstance(value, bytes | bytearray | memoryview):
        return format_bytes(bytes(value))
    if isinstance(value, TimeWindow):
        return format_window(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, set | frozenset):  # in a trace script: sorted, as output is
        return "[" + ", ".join(sorted(_text(v) for v in value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_text(k)}: {_text(v)}" for k, v in value.items()) + "}"
    if type(value) is Undecodable:
        return undecodable_text(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, Instant | LocalTime | LocalDateTime | decimal.Decimal | uuid.UUID):
        return str(value)
    return repr(value)  # a Python object of a trace script


def _block(value: Any, indent: int, level: int) -> str:
    """:func:`format_value` laid out over lines (``indent`` spaces a level)."""
    if isinstance(value, str) and level == 0:
        return format_value(value)
    if isinstance(value, TimeWindow) or not value or not isinstance(
            value, list | tuple | set | frozenset | dict):
        return _text(value)
    inner = " " * (indent * (level + 1))
    if isinstance(value, dict):
        lines = [f"{inner}{_text(k)}: {_block(v, indent, level + 1)}" for k, v in value.items()]
        opening, closing = "{", "}"
    else:
        lines = [inner + _block(v, indent, level + 1) for v in value]
        if isinstance(value, set | frozenset):
            lines.sort()
        opening, closing = "[", "]"
    return opening + "\n" + ",\n".join(lines) + "\n" + " " * (indent * level) + closing


def format_bytes(data: bytes) -> str:
    """Bytes for people: ``0x`` and two hex digits a byte (``0x00ff``; empty: ``0x``).

    Longer than :data:`BYTES_SHOWN` bytes: the first ones, ``…`` and the length
    (``0x8004…(1,024 bytes)``). Hex, not base64 (which JSON documents use), because state
    bytes are read byte by byte: a flag byte, a length prefix, the version byte of a pickle or
    a Kryo class id stay visible; ``0x`` marks the value as bytes and is never a string (a
    string of that form is quoted) or a decimal number.
    """
    if len(data) <= BYTES_SHOWN:
        return "0x" + data.hex()
    return f"0x{data[:BYTES_SHOWN].hex()}…({len(data):,} bytes)"


def format_window(window: TimeWindow) -> str:
    """A Flink ``TimeWindow`` as its half-open interval of ISO times (:func:`format_epoch_ms`).

    ``[2026-01-01T00:00:00Z, 2026-01-01T00:01:00Z)``: the end is not in the window.
    """
    return f"[{format_epoch_ms(window.start)}, {format_epoch_ms(window.end)})"


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def format_epoch_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC (``2023-11-14T22:13:20.250Z``); out of range: as is.

    Exact (integer arithmetic, no float seconds) for years 1..9999, ``"<ms> ms"`` beyond.
    """
    try:
        when = _EPOCH + datetime.timedelta(milliseconds=ms)
    except OverflowError:
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


def undecodable_text(marker: Undecodable) -> str:
    """A short marker for a value statectl could not decode: its class, size and reason."""
    size = "" if marker.data is None else f", {len(marker.data)} bytes"
    reason = marker.reason if len(marker.reason) <= 120 else marker.reason[:117] + "..."
    what = "damaged" if marker.damaged else "undecodable"
    return f"<{what} {marker.class_name.rsplit('.', 1)[-1]}{size}: {reason}>"


def to_json_value(value: Any) -> Any:
    """A value as every JSON document holds it (docs/json.md, "Values").

    As ``export`` writes JSON (:func:`formats.ops.export.jsonable`, strict: non-finite floats as
    strings), the void namespace as ``null``, a map entry as its key, namespace and state, and
    anything JSON has no form for as its ``repr``.
    """
    if value is None or value is VOID_NAMESPACE:
        return None
    if isinstance(value, StateEntry):
        return {"key": to_json_value(value.key), "namespace": to_json_value(value.namespace),
                "state": to_json_value(value.state)}
    from formats.ops.export import jsonable  # here: trace's values need no formats (pyarrow)

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
