"""The model's Arrow columns of state, and how stored states map onto them.

Every format's reader produces state in these columns and every operation reads them
(:mod:`formats.model.checkpoint`); statectl's format stores exactly them (:mod:`formats.statectl`).

Keyed state has ``key_group`` (int32), ``key``, ``namespace`` (absent for the void namespace),
``value`` and, with TTL, ``ttl_timestamp`` (int64 ms; ``list<int64>`` for list state,
``map<K, int64>`` for map state, parallel to the values). Operator state has ``value`` (list
states) or ``key`` and ``value`` (broadcast state). Every schema's metadata names the format
version, state and kind. Types are the type specs of :mod:`statecore.serializers`, realised by
:mod:`formats.model.arrow_types`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from formats.model.arrow_types import arrow_type
from statecore.checkpoint import StateMetadata
from statecore.errors import CorruptCheckpointError
from statecore.ttl import TtlValue
from statecore.undecodable import Undecodable

__all__ = [
    "UNDECODABLE_COLUMN",
    "UNDECODABLE_FIELD",
    "UNDECODABLE_TYPE",
    "join_ttl",
    "keyed_schema",
    "operator_schema",
    "split_ttl",
    "ttl_spec",
    "undecodable_column",
    "undecodable_of",
    "value_columns",
    "value_spec",
]


def value_spec(state: StateMetadata) -> str:
    """Type spec of the ``value`` column of a keyed state."""
    if state.kind == "list":
        return f"list<{state.value_type}>"
    if state.kind == "map":
        return f"map<{state.user_key_type},{state.value_type}>"
    return state.value_type


def ttl_spec(state: StateMetadata) -> str:
    """Type spec of the ``ttl_timestamp`` column (parallel to the values)."""
    if state.kind == "list":
        return "list<int64>"
    if state.kind == "map":
        return f"map<{state.user_key_type},int64>"
    return "int64"


def value_columns(state: StateMetadata) -> tuple[pa.DataType, pa.DataType | None]:
    """Arrow types of the ``value`` and ``ttl_timestamp`` columns of a keyed state."""
    return arrow_type(value_spec(state)), arrow_type(ttl_spec(state)) if state.ttl else None


def split_ttl(state: StateMetadata, stored: Any) -> tuple[Any, Any]:
    """A stored state as ``(value, ttl_timestamps)`` (timestamps ``None`` without TTL)."""
    if not state.ttl:
        return stored, None
    if state.kind == "list":
        return [e.user_value for e in stored], [e.last_access_timestamp for e in stored]
    if state.kind == "map":
        return ({k: v.user_value for k, v in stored.items()},
                {k: v.last_access_timestamp for k, v in stored.items()})
    return stored.user_value, stored.last_access_timestamp


def join_ttl(state: StateMetadata, value: Any, ttl: Any) -> Any:
    if not state.ttl:
        return value
    expected = {"list": list, "map": dict}.get(state.kind)
    if expected is not None and not (isinstance(value, expected) and isinstance(ttl, expected)):
        raise CorruptCheckpointError(
            f"state {state.name!r}: a {state.kind} value and its ttl timestamps must both be "
            f"present")
    try:
        if state.kind == "list":
            return [TtlValue(v, t) for v, t in zip(value, ttl, strict=True)]
        if state.kind == "map":
            return {k: TtlValue(v, ttl[k]) for k, v in value.items()}
    except (KeyError, ValueError, TypeError) as exc:
        raise CorruptCheckpointError(
            f"state {state.name!r}: values and ttl timestamps do not match") from exc
    if not isinstance(ttl, int):
        raise CorruptCheckpointError(f"state {state.name!r}: missing ttl timestamp")
    return TtlValue(value, ttl)


def keyed_schema(state: StateMetadata, key_type: str) -> pa.Schema:
    value_type, ttl_type = value_columns(state)
    fields = [pa.field("key_group", pa.int32(), nullable=False),
              pa.field("key", arrow_type(key_type), nullable=False)]
    if state.namespace_type != "void":
        fields.append(pa.field("namespace", arrow_type(state.namespace_type), nullable=False))
    fields.append(pa.field("value", value_type))
    if ttl_type is not None:
        fields.append(pa.field("ttl_timestamp", ttl_type))
    return pa.schema(fields, metadata=schema_metadata(state))


def operator_schema(state: StateMetadata) -> pa.Schema:
    fields = [pa.field("value", arrow_type(state.value_type))]
    if state.kind == "broadcast":
        assert state.user_key_type is not None
        fields.insert(0, pa.field("key", arrow_type(state.user_key_type), nullable=False))
    return pa.schema(fields, metadata=schema_metadata(state))


def schema_metadata(state: StateMetadata) -> dict[str, str]:
    return {"statectl.format_version": "1", "statectl.state": state.name,
            "statectl.kind": state.kind}


#: The column of values a reader could not decode (:mod:`statecore.undecodable`), after the
#: declared ones where a table has such values: why a struct and not a bytes column alone --
#: a reader sees the class and the reason with the bytes, and the typed ``value`` column (null
#: in those rows) keeps its type for Spark, DuckDB and pandas (docs/flink-types.md).
UNDECODABLE_COLUMN = "value_undecodable"
UNDECODABLE_TYPE = pa.struct([("class", pa.string()), ("serializer", pa.string()),
                              ("reason", pa.string()), ("bytes", pa.binary()),
                              ("damaged", pa.bool_())])
UNDECODABLE_FIELD = pa.field(UNDECODABLE_COLUMN, UNDECODABLE_TYPE)


def undecodable_column(markers: Sequence[Undecodable | None]) -> pa.Array:
    """``value_undecodable`` of rows: a marker's fields, null where the value was decoded."""
    return pa.array([None if m is None else {"class": m.class_name, "serializer": m.serializer,
                                             "reason": m.reason, "bytes": m.data,
                                             "damaged": m.damaged}
                     for m in markers], UNDECODABLE_TYPE)


def undecodable_of(row: Mapping[str, Any]) -> Undecodable | None:
    """The marker of a row (from ``to_pylist``) whose value could not be decoded, if any."""
    found = row.get(UNDECODABLE_COLUMN)
    if found is None:
        return None
    return Undecodable(found["class"], found["serializer"], found["reason"], found["bytes"],
                       bool(found["damaged"]))
