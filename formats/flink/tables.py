"""Decoded Flink state as Arrow tables in the model's columns (:mod:`formats.columns`).

A :class:`DecodedTable` is one virtual data file of a Flink snapshot: the decoded rows of one
state and subtask (keyed ``(key_group, key, namespace, value)``, operator elements, broadcast
pairs), converted to Arrow when first read. :func:`arrow_table` converts rows anywhere: in
this process or in a Spark task that decoded some key groups of a stream.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from formats.arrow_types import storage_converter
from formats.columns import split_ttl, ttl_spec, value_spec
from formats.flink.types.codecs import Codec
from statecore.checkpoint import StateMetadata
from statecore.errors import CorruptCheckpointError, InvalidArgumentError, StatectlError
from statecore.key_groups import compute_key_group_for_key_hash

__all__ = ["DecodedTable", "arrow_table", "converter", "keyed_table", "rehash_rows"]


class DecodedTable:
    """One virtual data file of a decoded state.

    It holds the decoded rows, Flink's bytes in all and per row group (one per key group), and,
    computed when first asked for, the rows as an Arrow table and per row the key group its
    key's Java hash gives (``None``: the key type's hash is unknown). Opening a snapshot only
    decodes; conversion to Arrow happens for the files a command reads.

    ``rows`` may be a function that decodes them: a snapshot opened without decoding its keyed
    state (:func:`formats.flink.checkpoint.open_flink_checkpoint` with ``decode=False``)
    decodes a file's rows in this process the first time they are asked for.
    """

    def __init__(self, rows: list[Any] | Callable[[], list[Any]], schema: pa.Schema,
                 keyed: bool, flink_bytes: int, row_groups: list[tuple[int, int]],
                 key_codec: Codec | None = None, max_parallelism: int = 0, where: str = "",
                 state: StateMetadata | None = None, key_type: str | None = None) -> None:
        self._rows, self.schema, self.keyed, self.where = rows, schema, keyed, where
        self.flink_bytes, self.row_groups = flink_bytes, row_groups
        self.key_codec, self.max_parallelism = key_codec, max_parallelism
        self.state, self.key_type = state, key_type
        self._table: pa.Table | None = None

    @property
    def rows(self) -> list[Any]:
        """The decoded rows (decoded now if they were not at open)."""
        if callable(self._rows):
            self._rows = self._rows()
        return self._rows

    @property
    def decoded(self) -> bool:
        """Whether the rows are in memory."""
        return not callable(self._rows)

    @property
    def table(self) -> pa.Table:
        if self._table is None:
            try:
                columns = self._columns()
            except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
                raise CorruptCheckpointError(f"{self.where}: decoded values do not fit their "
                                             f"declared types: {exc}") from exc
            try:
                self._table = arrow_table(columns, self.schema)
            except (CorruptCheckpointError, InvalidArgumentError) as exc:
                raise CorruptCheckpointError(f"{self.where}: {exc}") from exc
        return self._table

    def _columns(self) -> dict[str, list[Any]]:
        """The rows in the model's columns, as ``pa.array`` takes them."""
        rows = self.rows
        state = self.state
        if self.keyed:
            assert state is not None and self.key_type is not None
            key = converter(self.key_type)
            columns: dict[str, list[Any]] = {"key_group": [r[0] for r in rows],
                                             "key": [key(r[1]) for r in rows]}
            if "namespace" in self.schema.names:
                namespace = converter(state.namespace_type)
                columns["namespace"] = [namespace(r[2]) for r in rows]
            value = converter(value_spec(state))
            if state.ttl is not None:  # TtlValue wrappers: values and their timestamps
                split = [split_ttl(state, r[3]) for r in rows]
                stamps = converter(ttl_spec(state))
                columns["value"] = [value(v) for v, _ in split]
                columns["ttl_timestamp"] = [stamps(t) for _, t in split]
            else:
                columns["value"] = [value(r[3]) for r in rows]
        elif "key" in self.schema.names:  # broadcast (key, value) pairs
            assert state is not None and state.user_key_type is not None
            key, value = converter(state.user_key_type), converter(state.value_type)
            columns = {"key": [key(k) for k, _ in rows],
                       "value": [value(v) for _, v in rows]}
        else:
            value = _arrow_value if state is None else converter(state.value_type)
            columns = {"value": [value(v) for v in rows]}
        return columns

    def expected(self) -> np.ndarray | None:
        codec = self.key_codec
        if codec is None or codec.java_hash is None:
            return None
        try:
            return rehash_rows(codec.java_hash, self.rows, self.max_parallelism)
        except (StatectlError, TypeError, ValueError):
            return None


def rehash_rows(java_hash: Callable[[Any], int], rows: Sequence[tuple[int, Any, Any, Any]],
                max_parallelism: int) -> np.ndarray[Any, Any]:
    """The key group each row's key gets at ``max_parallelism`` from its Java hash.

    ``KeyGroupRangeAssignment.assignToKeyGroup`` per row, each distinct key hashed once (a
    ``RowData`` key by its binary form). Raises what hashing a bad key raises.
    """
    cache: dict[Any, int] = {}
    out = np.empty(len(rows), dtype=np.int32)
    for i, row in enumerate(rows):
        key = row[1]
        marker = getattr(key, "binary", key)
        group = cache.get(marker)
        if group is None:
            group = cache[marker] = compute_key_group_for_key_hash(java_hash(key),
                                                                   max_parallelism)
        out[i] = group
    return out


_PLAIN = (int, str, bytes, float, bool, type(None))
#: words only the specs of the types real jobs keep contain (struct, enum, java.time...)
_TYPED_WORDS = ("struct<", "enum<", "timestamp[", "date32", "local_", "bigint", "decimal",
                "kryo<", "opaque<", "global_window")


@functools.lru_cache(maxsize=1024)
def converter(spec: str) -> Callable[[Any], Any]:
    """How a decoded value of ``spec`` becomes what ``pa.array`` takes.

    The plain types (numbers, strings, bytes, lists, maps, tuples of them) by
    :func:`_arrow_value`, which needs no type; the others by
    :func:`formats.arrow_types.storage_converter` (instants to their counts, ...).
    """
    if any(word in spec for word in _TYPED_WORDS):
        convert = storage_converter(spec)  # the decoders made the values: no type checks
        return convert if convert is not None else _same
    return _arrow_value


def _same(value: Any) -> Any:
    return value


def _arrow_value(value: Any) -> Any:
    """A decoded Flink value as ``pa.array`` takes it (tuples as structs, maps as pairs)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list and (not value or type(value[0]) in _PLAIN) and all(
            type(v) in _PLAIN for v in value):
        return value
    if isinstance(value, tuple):
        return {f"f{i}": _arrow_value(v) for i, v in enumerate(value)}
    if isinstance(value, dict):
        return [(_arrow_value(k), _arrow_value(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_arrow_value(v) for v in value]
    return value


def arrow_table(columns: dict[str, list[Any]], schema: pa.Schema) -> pa.Table:
    try:
        arrays = [pa.array(columns[f.name], type=f.type) for f in schema]
        table = pa.Table.from_arrays(arrays, schema=schema)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
        raise CorruptCheckpointError(f"decoded values do not fit their declared types: "
                                     f"{exc}") from exc
    for f, column in zip(schema, table.columns, strict=True):
        if not f.nullable and column.null_count:
            raise CorruptCheckpointError(f"a decoded {f.name} is null (Flink wrote none)")
    return table


def keyed_table(rows: list[tuple[int, Any, Any, Any]], schema: pa.Schema,
                state: StateMetadata, key_type: str, where: str) -> pa.Table:
    """Keyed rows ``(key_group, key, namespace, value)`` of ``state`` as a table of ``schema``."""
    return DecodedTable(rows, schema, True, 0, [], where=where, state=state,
                        key_type=key_type).table
