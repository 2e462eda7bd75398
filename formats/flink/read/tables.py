"""Decoded Flink state as Arrow tables in the model's columns (:mod:`formats.model.columns`).

A :class:`DecodedTable` is one virtual data file of a Flink snapshot: the decoded rows of one
state and subtask (keyed ``(key_group, key, namespace, value)``, operator elements, broadcast
pairs), converted to Arrow when first read. :func:`arrow_table` converts rows anywhere: in
this process or in a Spark task that decoded some key groups of a stream.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from formats.flink.types.codecs import Codec
from formats.model.arrow_types import storage_converter
from formats.model.columns import (
    UNDECODABLE_FIELD,
    split_ttl,
    ttl_spec,
    undecodable_column,
    value_spec,
)
from statecore.checkpoint import StateMetadata
from statecore.errors import CorruptCheckpointError, InvalidArgumentError, StatectlError
from statecore.key_groups import compute_key_group_for_key_hash
from statecore.ttl import TtlValue
from statecore.undecodable import Undecodable

__all__ = ["DecodedTable", "arrow_table", "converter", "keyed_table", "rehash_rows"]


#: Key groups this far apart are decoded together by :meth:`DecodedTable.table_in`.
_GAP = 8


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
                 state: StateMetadata | None = None, key_type: str | None = None,
                 part: Callable[[int, int], list[Any]] | None = None,
                 part_bytes: Callable[[int, int], int] | None = None) -> None:
        self._rows, self.schema, self.keyed, self.where = rows, schema, keyed, where
        self.flink_bytes, self.row_groups = flink_bytes, row_groups
        self.key_codec, self.max_parallelism = key_codec, max_parallelism
        self.state, self.key_type = state, key_type
        #: keyed rows not decoded yet: ``part(first, last)`` decodes key groups
        #: ``first..last`` alone (:meth:`table_in`), ``part_bytes(first, last)`` their Flink
        #: bytes (:meth:`bytes_in`)
        self._part, self._part_bytes = part, part_bytes
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
        """The rows in the declared columns, converted when first asked for.

        Values that could not be decoded are null there, with a ``value_undecodable`` column
        after the declared ones (:data:`formats.model.columns.UNDECODABLE_TYPE`).
        """
        if self._table is None:
            markers = self.markers()
            table = None if markers else self._plain_maps_table()
            if table is None:
                try:
                    columns = self._columns(markers)
                except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
                    raise CorruptCheckpointError(f"{self.where}: decoded values do not fit "
                                                 f"their declared types: {exc}") from exc
                try:
                    table = arrow_table(columns, self.schema)
                except (CorruptCheckpointError, InvalidArgumentError) as exc:
                    raise CorruptCheckpointError(f"{self.where}: {exc}") from exc
            if markers:
                table = table.append_column(UNDECODABLE_FIELD, undecodable_column(
                    [markers.get(i) for i in range(table.num_rows)]))
            self._table = table
        return self._table

    def table_in(self, key_groups: Collection[int]) -> pa.Table:
        """The keyed rows of ``key_groups``, in the columns of :attr:`table`.

        Rows not decoded yet are decoded for those key groups alone: runs of nearby key
        groups (at most :data:`_GAP` apart) are decoded together.
        """
        groups = sorted(set(key_groups))
        if self.decoded or self._part is None or not groups:
            table = self.table
        else:
            table = DecodedTable(self._rows_of(groups), self.schema, self.keyed, 0, [],
                                 self.key_codec, self.max_parallelism, self.where, self.state,
                                 self.key_type).table
        import pyarrow.compute as pc  # only where rows are filtered (issue 45: start-up)
        column = table.column("key_group")
        return table.filter(pc.is_in(column, pa.array(groups, column.type)))

    def rows_in(self, first: int, last: int) -> list[Any]:
        """The keyed rows of key groups ``first..last``, in the order decoded.

        Rows not decoded yet are decoded for those key groups alone (and not kept here).
        """
        if self.decoded or self._part is None:
            return [row for row in self.rows if first <= row[0] <= last]
        return self._part(first, last)

    def _runs(self, groups: list[int]) -> list[tuple[int, int]]:
        """``groups`` (sorted) as runs ``(first, last)`` decoded together (:data:`_GAP`)."""
        runs: list[tuple[int, int]] = []
        for group in groups:
            if runs and group - runs[-1][1] <= _GAP:
                runs[-1] = (runs[-1][0], group)
            else:
                runs.append((group, group))
        return runs

    def _rows_of(self, groups: list[int]) -> list[Any]:
        """The rows of ``groups`` (sorted) alone, decoded for them (:meth:`table_in`'s)."""
        assert self._part is not None
        wanted = set(groups)
        return [row for first, last in self._runs(groups) for row in self._part(first, last)
                if row[0] in wanted]

    def expected_in(self, key_groups: Collection[int]) -> np.ndarray | None:
        """:meth:`expected` for the rows of :meth:`table_in` (the same key groups)."""
        groups = sorted(set(key_groups))
        if self.decoded or self._part is None or not groups:
            expected = self.expected()
            if expected is None:
                return None
            stored = np.fromiter((r[0] for r in self.rows), np.int64, len(self.rows))
            return expected[np.isin(stored, groups)]
        return DecodedTable(self._rows_of(groups), self.schema, self.keyed, 0, [],
                            self.key_codec, self.max_parallelism).expected()

    def bytes_in(self, key_groups: Collection[int]) -> int | None:
        """Flink's bytes of ``key_groups`` when not decoded at open; ``None``: as at open.

        Opened without decoding, a keyed file's size is not known until its pieces are.
        """
        if self._part_bytes is None:
            return None
        return sum(self._part_bytes(first, last)
                   for first, last in self._runs(sorted(set(key_groups))))

    def markers(self) -> dict[int, Undecodable]:
        """Row index -> the value that could not be decoded (kept as a marker), if any."""
        rows = self.rows
        if self.keyed:
            return {i: r[3] for i, r in enumerate(rows) if type(r[3]) is Undecodable}
        if "key" in self.schema.names:
            return {i: r[1] for i, r in enumerate(rows) if type(r[1]) is Undecodable}
        return {i: v for i, v in enumerate(rows) if type(v) is Undecodable}

    def _plain_maps_table(self) -> pa.Table | None:
        """A map state's table without looking into its maps first, where that is safe.

        :meth:`_columns` takes each map apart to null the values that could not be decoded
        (markers inside a map); a map of plain keys and values goes to ``pa.array`` as it is
        (:func:`converter`), which refuses a marker (not a plain value) -- then, and for any
        other map or state, ``None``: the careful way (1M maps: 2.6 s less).
        """
        state = self.state
        if (not self.keyed or state is None or state.kind != "map" or state.ttl is not None
                or self.key_type is None or converter(value_spec(state)) is not _same):
            return None
        try:
            return arrow_table(_keyed_columns(self.rows, state, self.key_type,
                                              "namespace" in self.schema.names), self.schema)
        except (CorruptCheckpointError, InvalidArgumentError, AttributeError, TypeError,
                KeyError, ValueError, IndexError):
            return None

    def _columns(self, markers: dict[int, Undecodable]) -> dict[str, list[Any]]:
        """The rows in the model's columns, as ``pa.array`` takes them.

        ``markers``' rows hold no value (null; a binary column: the marker's bytes), and a
        map value that could not be decoded is null in its map.
        """
        rows = self.rows
        state = self.state
        if markers or (state is not None and state.kind == "map"):
            rows = _without_markers(rows, markers, self.keyed, state)
        if self.keyed:
            assert state is not None and self.key_type is not None
            columns = _keyed_columns(rows, state, self.key_type,
                                     "namespace" in self.schema.names)
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


def _keyed_columns(rows: list[tuple[int, Any, Any, Any]], state: StateMetadata, key_type: str,
                   with_namespace: bool) -> dict[str, list[Any]]:
    """Keyed rows ``(key_group, key, namespace, value)`` as the model's columns.

    A column whose values ``pa.array`` takes as decoded (:func:`converter` gives
    :func:`_same`) is taken without a call per value (11M calls: 0.4 s).
    """
    def column(index: int, convert: Callable[[Any], Any]) -> list[Any]:
        if convert is _same:
            return [r[index] for r in rows]
        return [convert(r[index]) for r in rows]

    columns: dict[str, list[Any]] = {"key_group": [r[0] for r in rows],
                                     "key": column(1, converter(key_type))}
    if with_namespace:
        columns["namespace"] = column(2, converter(state.namespace_type))
    value = converter(value_spec(state))
    if state.ttl is not None:  # TtlValue wrappers: values and their timestamps
        split = [split_ttl(state, r[3]) for r in rows]
        stamps = converter(ttl_spec(state))
        columns["value"] = [value(v) for v, _ in split]
        columns["ttl_timestamp"] = [stamps(t) for _, t in split]
    else:
        columns["value"] = column(3, value)
    return columns


def _without_markers(rows: list[Any], markers: dict[int, Undecodable], keyed: bool,
                     state: StateMetadata | None) -> list[Any]:
    """``rows`` with the markers out of the typed columns.

    A marker becomes null, or its bytes in a binary (``kryo``/``opaque``) column; map values
    that could not be decoded are null in their maps (their marker is counted, not kept).
    """
    spec = "" if state is None else (value_spec(state) if keyed else state.value_type)
    binary = spec.startswith(("kryo<", "opaque<", "bytes"))
    ttl = state is not None and state.ttl is not None

    def plain(value: Any) -> Any:
        if type(value) is Undecodable:
            if ttl:
                # no last access known: a null ttl_timestamp
                return TtlValue(value.data if binary else None, None)  # type: ignore[arg-type]
            return value.data if binary else None
        if type(value) is dict and any(type(v) is Undecodable for v in value.values()):
            return {k: (None if type(v) is Undecodable else v) for k, v in value.items()}
        return value

    if keyed:
        return [(r[0], r[1], r[2], plain(r[3])) if i in markers or type(r[3]) is dict else r
                for i, r in enumerate(rows)]
    if state is not None and state.kind == "broadcast":
        return [(r[0], plain(r[1])) for r in rows]
    return [plain(v) for v in rows]


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
#: specs whose decoded values are of :data:`_PLAIN` types (lists of them too): pa.array's already
_AS_DECODED = frozenset({"int8", "int16", "int32", "int64", "float32", "float64", "bool",
                         "string", "bytes"})
#: words only the specs of the types real jobs keep contain (struct, enum, java.time...)
_TYPED_WORDS = ("struct<", "enum<", "timestamp[", "date32", "local_", "bigint", "decimal",
                "kryo<", "opaque<", "global_window", "json")


@functools.lru_cache(maxsize=1024)
def converter(spec: str) -> Callable[[Any], Any]:
    """How a decoded value of ``spec`` becomes what ``pa.array`` takes.

    The plain types (numbers, strings, bytes, lists, maps, tuples of them) by
    :func:`_arrow_value`, which needs no type; the others by
    :func:`formats.model.arrow_types.storage_converter` (instants to their counts, ...).
    """
    if spec in _AS_DECODED or (spec.startswith("list<") and spec[5:-1] in _AS_DECODED):
        return _same  # what _arrow_value leaves as it is, without looking (1M calls: 0.9 s)
    if spec.startswith("map<") and all(part in _AS_DECODED for part in spec[4:-1].split(",")):
        # a map of plain keys and values: as it is where pa.array takes a dict (1M maps:
        # 3.7 s less than its pairs), else its pairs (6 s -> 1 s against _arrow_value)
        return _same if _dicts_as_maps() else _pairs
    if any(word in spec for word in _TYPED_WORDS):
        convert = storage_converter(spec)  # the decoders made the values: no type checks
        return convert if convert is not None else _same
    return _arrow_value


@functools.cache
def _dicts_as_maps() -> bool:
    """Whether this pyarrow builds a map array from dicts (the releases statectl allows)."""
    try:
        built = pa.array([{1: 2}, None], type=pa.map_(pa.int32(), pa.int32()))
    except (pa.ArrowException, TypeError, ValueError):
        return False
    return bool(built.to_pylist() == [[(1, 2)], None])


def _same(value: Any) -> Any:
    return value


def _pairs(value: Any) -> Any:
    """A decoded map of plain keys and values as ``pa.array`` takes a map: its pairs."""
    return None if value is None else list(value.items())


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
    except MemoryError:  # pyarrow's ArrowMemoryError too: not the values' fault
        raise
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
