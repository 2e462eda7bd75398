"""A query's result as statectl's values: what ``query`` shows, as every command shows values.

DuckDB hands a result back as Arrow with its own types, and no trace of the type specs of the
state it read (field metadata does not cross it). Each column is read back into the Python
values the other commands hold (:mod:`formats.model.arrow_types`), so that one function renders
them everywhere: :func:`formats.ops.export.jsonable` (JSON Lines, CSV, and through
``cli.values.to_json_value`` JSON documents) and ``cli.values.format_value`` (text).

Two ways a column is read, the first that applies:

1. **As the state's column it is.** A result column with the name and the (DuckDB) type of a
   ``key``, ``namespace``, ``value``, ``ttl_timestamp`` or ``value_undecodable`` column of a
   state table the query read, the same spec in every such table, is decoded as ``export``
   decodes that column (:func:`state_columns`: :func:`formats.ops.export.column_decoders`; a
   Flink ``TimeWindow`` namespace as a :class:`~statecore.values.TimeWindow`; the
   undecodable marker as an :class:`~statecore.undecodable.Undecodable`). So ``SELECT *``
   and ``SELECT key, value`` give exactly ``export``'s values, type specs Arrow cannot tell
   apart included (``bigint`` and ``json`` are text in SQL; a window is a tuple of two
   numbers).
2. **By its Arrow type** (any other column: computed, renamed, or of metadata):

   ==============================  ===================================================
   Arrow type                      value
   ==============================  ===================================================
   struct ``f0, f1, ...``          tuple (Flink tuples and rows are stored so)
   struct ``start, end`` (ints)    :class:`~statecore.values.TimeWindow` (JSON: an array)
   other struct                    dict of its fields (a POJO)
   map                             dict (JSON: an object when the keys are strings)
   list                            list
   timestamp with a time zone      :class:`~statecore.values.Instant` (JSON: epoch ms)
   timestamp without one           :class:`~statecore.values.LocalDateTime`
   time                            :class:`~statecore.values.LocalTime`
   date                            ``datetime.date``
   decimal of scale 0              int (DuckDB's ``HUGEINT``: ``sum`` of a ``BIGINT``)
   other decimal                   ``decimal.Decimal`` (JSON: its exact text, as export)
   anything else                   as ``to_pylist`` gives it (numbers, strings, bytes...)
   ==============================  ===================================================
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from formats.model.arrow_types import pylist
from formats.model.checkpoint import Checkpoint
from formats.model.columns import UNDECODABLE_COLUMN, ttl_spec, undecodable_of, value_spec
from formats.ops.export import column_decoders
from statecore.checkpoint import OperatorMetadata, StateMetadata
from statecore.errors import InvalidArgumentError
from statecore.values import Instant, LocalDateTime, LocalTime, TimeWindow

__all__ = ["Reader", "StateColumns", "arrow_reader", "state_columns", "table_values"]

#: Turns one value of a column, as :func:`formats.model.arrow_types.pylist` gives it, into
#: statectl's Python value (``None`` is never passed).
Reader = Callable[[Any], Any]

#: Nanoseconds per unit of an Arrow timestamp or time.
_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _same(value: Any) -> Any:
    return value


def _nullable(read: Reader) -> Reader:
    return lambda value: None if value is None else read(value)


def _hashable(value: Any) -> Any:
    """A map key usable in a dict: lists (and lists in tuples) as tuples."""
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    return value


def _integral(value: decimal.Decimal) -> int | decimal.Decimal:
    return int(value) if value == value.to_integral_value() else value


def arrow_reader(data_type: pa.DataType) -> Reader:
    """How a value of an Arrow column of ``data_type`` reads back (the module's table)."""
    if pa.types.is_struct(data_type):
        fields = [(data_type.field(i).name, _nullable(arrow_reader(data_type.field(i).type)))
                  for i in range(data_type.num_fields)]
        names = [name for name, _ in fields]
        if fields and names == [f"f{i}" for i in range(len(fields))]:
            return lambda value: tuple(read(value[name]) for name, read in fields)
        if names == ["start", "end"] and all(pa.types.is_integer(data_type.field(i).type)
                                             for i in range(2)):
            return lambda value: TimeWindow(value["start"], value["end"])
        return lambda value: {name: read(value[name]) for name, read in fields}
    if pa.types.is_map(data_type):
        key = arrow_reader(data_type.key_type)
        item = _nullable(arrow_reader(data_type.item_type))

        def mapping(value: Any) -> Any:
            pairs = [(_hashable(key(k)), item(v)) for k, v in value]
            try:
                return dict(pairs)
            except TypeError:  # a key JSON has no hashable form for (a struct): the pairs
                return pairs
        return mapping
    if (pa.types.is_list(data_type) or pa.types.is_large_list(data_type)
            or pa.types.is_fixed_size_list(data_type)):
        element = _nullable(arrow_reader(data_type.value_type))
        return lambda value: [element(v) for v in value]
    if pa.types.is_dictionary(data_type):
        return arrow_reader(data_type.value_type)
    if pa.types.is_timestamp(data_type):
        factor = _NANOS[data_type.unit]
        if data_type.tz is None:
            return lambda value: LocalDateTime(value * factor)
        return lambda value: Instant(value * factor)
    if pa.types.is_time(data_type):
        factor = _NANOS[data_type.unit]
        return lambda value: LocalTime(value * factor)
    if pa.types.is_decimal(data_type):
        return _integral if data_type.scale <= 0 else _same
    if pa.types.is_float16(data_type):
        return float
    return _same


@dataclass(frozen=True)
class StateColumns:
    """The typed columns of one state table a query read: how each reads back.

    ``types``: each column's Arrow type as DuckDB returns it; ``readers``: per column, what it
    holds (its spec; a refined namespace marked) and its reader.
    """

    types: Mapping[str, pa.DataType]
    readers: Mapping[str, tuple[str, Reader]]


def state_columns(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata,
                  types: Mapping[str, pa.DataType]) -> StateColumns:
    """How the typed columns of one state's table decode, as ``export`` decodes them.

    ``key``, ``namespace`` (a Flink ``TimeWindow`` as one), ``value``, ``ttl_timestamp`` and
    ``value_undecodable`` (the marker); ``types``: the table's column types from DuckDB.
    """
    decoders = column_decoders(op, state)
    key_spec = op.key_type if state.scope == "keyed" else state.user_key_type
    specs = {"key": key_spec, "namespace": state.namespace_type,
             "value": value_spec(state) if state.scope == "keyed" else state.value_type,
             "ttl_timestamp": ttl_spec(state) if state.ttl else None}
    readers: dict[str, tuple[str, Reader]] = {
        name: (str(specs[name]), read) for name, read in decoders.items()}
    namespace = checkpoint.namespace_reader(op, state)
    if namespace is not None and namespace is not decoders["namespace"]:
        readers["namespace"] = (f"{state.namespace_type} (refined)", namespace)
    window = types.get("namespace")
    if window is not None and pa.types.is_struct(window) and window.num_fields == 2 and \
            window.field(0).name == "start":  # a window as export's Parquet has it
        readers["namespace"] = ("window", arrow_reader(window))
    readers[UNDECODABLE_COLUMN] = (UNDECODABLE_COLUMN, _marker)
    return StateColumns(types, readers)


def _marker(value: Any) -> Any:
    return undecodable_of({UNDECODABLE_COLUMN: value})


def _column_reader(field: pa.Field, sources: Sequence[StateColumns]) -> Reader:
    """The reader of one result column: its state column's when it is one, else by type."""
    by_type = arrow_reader(field.type)
    found = {source.readers[field.name] for source in sources
             if field.name in source.readers and source.types.get(field.name) == field.type}
    if len({what for what, _ in found}) != 1:
        return by_type  # not a state's column, or those of several specs: by its type
    _, spec_read = next(iter(found))

    def read(value: Any) -> Any:
        try:
            return spec_read(value)
        except (InvalidArgumentError, ValueError, TypeError, KeyError):
            return by_type(value)  # computed under that name: not what the spec says
    return read


def table_values(table: pa.Table, sources: Sequence[StateColumns] = ()
                 ) -> list[dict[str, Any]]:
    """The rows of ``table`` as dicts of statectl's values (``None`` for null).

    ``sources``: the state tables the query read (:func:`state_columns`).
    """
    columns = []
    for i, field in enumerate(table.schema):
        read = _column_reader(field, sources)
        columns.append((field.name, [None if v is None else read(v)
                                     for v in pylist(table.column(i))]))
    return [{name: values[row] for name, values in columns} for row in range(table.num_rows)]
