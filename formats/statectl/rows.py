"""Rows of a statectl keyed file from state snapshots: entries into typed columns.

:func:`block_appender` appends one key group's entries (``StateEntry`` of a map snapshot) to
the pending columns of a keyed file (:mod:`formats.model.columns`), column-wise, checking each value
where ``pa.array`` would otherwise accept a wrong type silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from formats.model.arrow_types import is_scalar, to_arrow
from formats.model.columns import split_ttl, ttl_spec, value_spec
from statecore.checkpoint import StateMetadata
from statecore.errors import InvalidArgumentError

__all__ = ["block_appender"]


_INTEGERS = frozenset({"int8", "int16", "int32", "int64"})


def _converter(spec: str) -> Callable[[Any], Any] | None:
    """A per-value conversion for ``pa.array``, or ``None`` where values pass as they are.

    Scalars are not converted in Python: ``pa.array(..., type=...)`` refuses most values of the
    wrong type (the writer turns that into a :class:`CheckpointError`); where it would accept
    one silently, a cheap type check runs per value (see ``_CHECKS``).
    """
    if not is_scalar(spec):
        return to_arrow(spec)
    return _CHECKS.get(spec)


def _check_integers(value: Any) -> Any:
    if type(value) is not int:
        raise InvalidArgumentError(f"{value!r} is not an integer")
    return value


def _check_string(value: Any) -> Any:
    if type(value) is not str:
        raise InvalidArgumentError(f"{value!r} is not a string")
    return value


def _check_bytes(value: Any) -> Any:
    if not isinstance(value, bytes | bytearray):
        raise InvalidArgumentError(f"{value!r} is not bytes")
    return value


def _check_char(value: Any) -> Any:
    if type(value) is not str or len(value) != 1 or ord(value) > 0xFFFF:
        raise InvalidArgumentError(f"{value!r} is not a char (one UTF-16 code unit)")
    return value


#: Per-value checks where ``pa.array`` would accept a value of another type silently
#: (a float truncated into an integer column, text into binary, bytes into a string column).
_CHECKS: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(_INTEGERS, _check_integers), "string": _check_string,
    "bytes": _check_bytes, "char": _check_char}


def block_appender(state: StateMetadata,
                    key_type: str) -> Callable[[int, Sequence[Any], dict[str, list[Any]]], None]:
    """Append one key group's entries to the pending columns of a keyed file, column-wise."""
    key = _converter(key_type)
    namespace = None if state.namespace_type == "void" else _converter(state.namespace_type)
    value = _converter(value_spec(state))
    ttl = _converter(ttl_spec(state))
    has_namespace = state.namespace_type != "void"

    def extend(column: list[Any], values: list[Any], convert: Callable[[Any], Any] | None
               ) -> None:
        column.extend(values if convert is None else map(convert, values))

    def append(key_group: int, entries: Sequence[Any], pending: dict[str, list[Any]]) -> None:
        pending["key_group"].extend([key_group] * len(entries))
        extend(pending["key"], [e.key for e in entries], key)
        if has_namespace:
            extend(pending["namespace"], [e.namespace for e in entries], namespace)
        if state.ttl:
            split = [split_ttl(state, e.state) for e in entries]
            extend(pending["value"], [v for v, _ in split], value)
            extend(pending["ttl_timestamp"], [t for _, t in split], ttl)
        else:
            extend(pending["value"], [e.state for e in entries], value)

    return append
