"""PyFlink's pickled Python values, shown only when the user allows unpickling (``--allow-pickle``).

PyFlink keeps Python state in Java as ``byte[]`` its Python-side coders wrote. For a state
declared with ``Types.PICKLED_BYTE_ARRAY()`` (arbitrary Python objects) that is
``PickledBytesCoderImpl``'s output: ``pickle.dumps(value)`` behind a 4-byte big-endian length
(its ``BinaryCoderImpl``); a bare pickle is accepted too. Typed PyFlink state (``Types.INT()``,
``Types.STRING()``, ...) is other coders' bytes and is never a pickle.

Unpickling runs code the snapshot carries, so it is never done by default: with
``allow_pickle`` a state's ``bytes`` parts (values, list elements, map keys or values,
operator-state elements, broadcast keys or values) whose every value is a pickle become
``string`` parts holding each unpickled object's ``repr()``; anything else stays as it is.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import Any

from statecore.checkpoint import StateMetadata
from statecore.errors import CorruptCheckpointError

__all__ = ["pickle_payload", "unpickle_keyed", "unpickle_operator"]

_STOP = b"."


def pickle_payload(value: Any) -> bytes | None:
    """The pickle inside a PyFlink-pickled value, or ``None`` when it is none.

    A pickle here starts with the ``PROTO`` opcode of protocol 2 to 5 and ends with ``STOP``.
    """
    if not isinstance(value, bytes):
        return None
    if (len(value) >= 7 and value[4] == 0x80 and 2 <= value[5] <= 5
            and int.from_bytes(value[:4], "big") == len(value) - 4 and value.endswith(_STOP)):
        return value[4:]
    if len(value) >= 3 and value[0] == 0x80 and 2 <= value[1] <= 5 and value.endswith(_STOP):
        return value
    return None


def _shown(value: bytes, where: str) -> str:
    payload = pickle_payload(value)
    assert payload is not None
    try:
        return repr(pickle.loads(payload))  # noqa: S301 - the user allowed it (--allow-pickle)
    except Exception as exc:  # noqa: BLE001 - whatever the pickle raises, say where
        raise CorruptCheckpointError(f"{where}: a pickled value does not unpickle: "
                                     f"{type(exc).__name__}: {exc}") from exc


Part = tuple[Callable[[Any], Iterator[Any]], Callable[[Any, Callable[[Any], Any]], Any]]

#: How to reach each part of a value, and rebuild it with that part converted.
_VALUE: Part = (lambda v: iter((v,)), lambda v, f: f(v))
_ELEMENTS: Part = (lambda v: iter(v or ()), lambda v, f: None if v is None else [f(e) for e in v])
_MAP_KEYS: Part = (lambda v: iter(v or ()),
                   lambda v, f: None if v is None else {f(k): x for k, x in v.items()})
_MAP_VALUES: Part = (lambda v: iter((v or {}).values()),
                     lambda v, f: None if v is None else {k: f(x) for k, x in v.items()})
_PAIR_KEYS: Part = (lambda v: iter((v[0],)), lambda v, f: (f(v[0]), v[1]))
_PAIR_VALUES: Part = (lambda v: iter((v[1],)), lambda v, f: (v[0], f(v[1])))


def _convert(values: list[Any], part: Part, where: str) -> bool:
    """Convert ``part`` of every value in place when all its non-null bytes are pickles."""
    get, rebuild = part
    found = [x for v in values for x in get(v) if x is not None]
    if not found or not all(pickle_payload(x) is not None for x in found):
        return False
    shown: dict[bytes, str] = {}

    def text(x: Any) -> Any:
        if x is None:
            return None
        if x not in shown:
            shown[x] = _shown(x, where)
        return shown[x]

    values[:] = [rebuild(v, text) for v in values]
    return True


def unpickle_keyed(state: StateMetadata, row_lists: list[list[tuple[int, Any, Any, Any]]],
                   where: str) -> StateMetadata:
    """Unpickle a keyed state's rows; the state with its converted parts typed ``string``.

    ``row_lists`` (every subtask's ``(key group, key, namespace, value)`` rows) change in place.
    """
    parts: list[tuple[Part, str]] = []
    if state.value_type == "bytes":
        parts.append((_ELEMENTS if state.kind == "list" else
                      _MAP_VALUES if state.kind == "map" else _VALUE, "value_type"))
    if state.kind == "map" and state.user_key_type == "bytes":
        parts.append((_MAP_KEYS, "user_key_type"))
    changes: dict[str, str] = {}
    for (get, rebuild), field in parts:
        values = [row[3] for rows in row_lists for row in rows]
        if _convert(values, (get, rebuild), f"{where}, state {state.name!r}"):
            changes[field] = "string"
            it = iter(values)
            for rows in row_lists:
                rows[:] = [(kg, key, ns, next(it)) for kg, key, ns, _old in rows]
    return _typed(state, changes)


def unpickle_operator(state: StateMetadata, element_lists: list[list[Any]], where: str
                      ) -> StateMetadata:
    """Unpickle an operator state's elements (broadcast: ``(key, value)`` pairs) in place."""
    parts: list[tuple[Part, str]] = []
    if state.kind == "broadcast":
        if state.user_key_type == "bytes":
            parts.append((_PAIR_KEYS, "user_key_type"))
        if state.value_type == "bytes":
            parts.append((_PAIR_VALUES, "value_type"))
    elif state.value_type == "bytes":
        parts.append((_VALUE, "value_type"))
    changes: dict[str, str] = {}
    for part, field in parts:
        values = [e for elements in element_lists for e in elements]
        if _convert(values, part, f"{where}, state {state.name!r}"):
            changes[field] = "string"
            it = iter(values)
            for elements in element_lists:
                elements[:] = [next(it) for _ in elements]
    return _typed(state, changes)


def _typed(state: StateMetadata, changes: dict[str, str]) -> StateMetadata:
    if not changes:
        return state
    return StateMetadata(state.name, state.scope, state.kind,
                         changes.get("value_type", state.value_type),
                         changes.get("user_key_type", state.user_key_type),
                         state.namespace_type, state.ttl)
