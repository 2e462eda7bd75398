"""Aggregations that ``statectl build`` keeps in keyed state, one named state each.

============================  ===============================================================
spec                          state
============================  ===============================================================
``count``                     reducing state ``count`` (int64): records per key
``sum:COL``                   reducing state ``sum_COL``: the column's sum
``min:COL`` / ``max:COL``     reducing state ``min_COL`` / ``max_COL``
``last:COL``                  value state ``last_COL``: the latest value
``list:COL``                  list state ``list_COL``: every value, in arrival order
``map:KEYCOL=VALCOL``         map state ``map_KEYCOL``: KEYCOL -> latest VALCOL
``window-count:COL:SIZE``     reducing state ``window_count_COL`` (int64) per tumbling window
                              of SIZE (in COL's units, e.g. ms): namespace = window start
============================  ===============================================================

A record is a ``dict`` of column values; null values are skipped (no state change).

Folding (:class:`statecore.job.RecordFolder`): ``count``, and ``sum``/``min``/``max`` of an
integer column, without TTL, are *foldable*: a key's records of a run can be reduced first
(their count, the sum, min or max of their non-null values, ``None`` when all are null) and
the result reduced into the state once — the same state as one reduction per record, because
these reductions of Python ints are associative and commutative and a run never straddles a
checkpoint. Float sums are not (rounding depends on the order), nor float min/max (NaN, -0.0),
nor TTL (every access stamps a time and runs incremental cleanup).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from statecore.errors import InvalidArgumentError
from statecore.job import RuntimeContext
from statecore.keyed_state import (
    KeyedState,
    StateDescriptor,
    list_state,
    map_state,
    reducing_state,
    value_state,
)
from statecore.ttl import TtlConfig

__all__ = ["Aggregation", "AggregatingFunction", "parse_aggregation"]

_INTEGER = {"int8", "int16", "int32", "int64"}
_NUMERIC = {*_INTEGER, "float32", "float64"}


def _add(a: Any, b: Any) -> Any:
    return a + b


def _min(a: Any, b: Any) -> Any:
    return b if b < a else a


def _max(a: Any, b: Any) -> Any:
    return b if b > a else a


@dataclass(frozen=True)
class Aggregation:
    """One parsed ``--agg`` spec: its state, and the columns it reads."""

    spec: str
    op: str
    column: str | None
    second_column: str | None
    window_size: int | None
    descriptor: StateDescriptor

    @property
    def state_name(self) -> str:
        return self.descriptor.name

    @property
    def foldable(self) -> bool:
        """Whether a run of records may be folded first (see the module doc)."""
        return self.descriptor.ttl is None and (
            self.op == "count"
            or (self.op in ("sum", "min", "max") and self.descriptor.value_type in _INTEGER))


def parse_aggregation(spec: str, column_types: Mapping[str, str],
                      ttl: TtlConfig | None = None) -> Aggregation:
    """Parse one spec against the input's column types (type specs by column name)."""
    op, _, rest = spec.partition(":")

    def column(name: str, numeric: bool = False) -> str:
        if name not in column_types:
            raise InvalidArgumentError(f"--agg {spec}: no column {name!r} in the input "
                                       f"(columns: {', '.join(sorted(column_types))})")
        if numeric and column_types[name] not in _NUMERIC:
            raise InvalidArgumentError(
                f"--agg {spec}: column {name!r} is {column_types[name]}, not numeric")
        return name

    if op == "count" and not rest:
        return Aggregation(spec, op, None, None, None,
                           reducing_state("count", _add, "int64", ttl=ttl))
    if op in ("sum", "min", "max") and rest:
        col = column(rest, numeric=True)
        functions: dict[str, Callable[[Any, Any], Any]] = {"sum": _add, "min": _min,
                                                           "max": _max}
        function = functions[op]
        return Aggregation(spec, op, col, None, None, reducing_state(
            f"{op}_{col}", function, column_types[col], ttl=ttl))
    if op == "last" and rest:
        col = column(rest)
        return Aggregation(spec, op, col, None, None,
                           value_state(f"last_{col}", column_types[col], ttl=ttl))
    if op == "list" and rest:
        col = column(rest)
        return Aggregation(spec, op, col, None, None,
                           list_state(f"list_{col}", column_types[col], ttl=ttl))
    if op == "map" and "=" in rest:
        key_col, value_col = (column(c) for c in rest.split("=", 1))
        return Aggregation(spec, op, key_col, value_col, None, map_state(
            f"map_{key_col}", column_types[key_col], column_types[value_col], ttl=ttl))
    if op == "window-count" and rest.count(":") == 1:
        col, size_text = rest.split(":")
        col = column(col, numeric=True)
        if not size_text.isdigit() or int(size_text) <= 0:
            raise InvalidArgumentError(f"--agg {spec}: the window size must be a positive "
                                       "integer")
        return Aggregation(spec, op, col, None, int(size_text), reducing_state(
            f"window_count_{col}", _add, "int64", namespace_type="int64", ttl=ttl))
    raise InvalidArgumentError(
        f"unknown aggregation {spec!r} (known: count, sum:COL, min:COL, max:COL, last:COL, "
        "list:COL, map:KEYCOL=VALCOL, window-count:COL:SIZE)")


class AggregatingFunction:
    """The process function of ``statectl build``: every aggregation, for every record."""

    def __init__(self, aggregations: list[Aggregation]) -> None:
        names = [a.state_name for a in aggregations]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"two aggregations would share a state: {names}")
        self.aggregations = aggregations
        self._states: list[KeyedState] = []

    def open(self, context: RuntimeContext) -> None:
        self._states = [context.keyed.get_state(a.descriptor) for a in self.aggregations]

    def process(self, record: Mapping[str, Any], context: RuntimeContext) -> None:
        for aggregation, state in zip(self.aggregations, self._states, strict=True):
            value = 1 if aggregation.column is None else record.get(aggregation.column)
            if value is None:
                continue
            op = aggregation.op
            if op in ("count", "sum", "min", "max"):
                state.add(value)  # type: ignore[attr-defined]
            elif op == "last":
                state.update(value)  # type: ignore[attr-defined]
            elif op == "list":
                state.add(value)  # type: ignore[attr-defined]
            elif op == "map":
                assert aggregation.second_column is not None
                item = record.get(aggregation.second_column)
                if item is not None:
                    state.put(value, item)  # type: ignore[attr-defined]
            else:  # window-count
                assert aggregation.window_size is not None
                state.set_current_namespace(value - value % aggregation.window_size)
                state.add(1)  # type: ignore[attr-defined]

    def process_folded(self, folded: tuple[Any, ...], context: RuntimeContext) -> None:
        """Apply one key's folded records: per aggregation (all foldable), their reduction.

        ``folded[i]`` is the count (``count``) or the sum, min or max of the non-null values
        of the records (``None``: all were null, no state change), as :class:`Aggregation`'s
        module doc describes.
        """
        for state, value in zip(self._states, folded, strict=True):
            if value is not None:
                state.add(value)  # type: ignore[attr-defined]
