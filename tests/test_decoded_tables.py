"""Decoded Flink rows as Arrow tables (formats.flink.read.tables): the fast way and the careful
way give one table.

A map of plain keys and values goes to ``pa.array`` as it is; one holding a value statectl
could not decode (an :class:`Undecodable` marker inside the map) is taken apart, the marker
null in its map. Both are compared with a table built here, value by value.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.flink.read.tables import keyed_table
from formats.model.columns import keyed_schema
from statecore.checkpoint import StateMetadata
from statecore.serializers import VOID_NAMESPACE
from statecore.undecodable import Undecodable

MARKER = Undecodable("com.example.Thing", "KryoSerializer", "no decoder", b"\x01\x02", False)

maps = st.dictionaries(st.integers(-2**31, 2**31 - 1),
                       st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.just(MARKER)),
                       max_size=4)


def _expected(rows: list[tuple[int, Any, Any, Any]], schema: pa.Schema) -> pa.Table:
    """The table as the model defines it: each marker null in its map, the maps' pairs."""
    values = [None if m is None else [(k, None if v is MARKER else v) for k, v in m.items()]
              for _, _, _, m in rows]
    return pa.Table.from_arrays([pa.array([r[0] for r in rows], pa.int32()),
                                 pa.array([r[1] for r in rows], pa.string()),
                                 pa.array(values, schema.field("value").type)], schema=schema)


@settings(max_examples=60, deadline=None)
@given(st.lists(maps, max_size=30))
def test_map_rows_with_and_without_markers_inside_give_the_models_table(
        values: list[dict[int, Any]]) -> None:
    state = StateMetadata("m", "keyed", "map", "int64", user_key_type="int32")
    schema = keyed_schema(state, "string")
    rows = [(i % 7, f"k{i}", VOID_NAMESPACE, m) for i, m in enumerate(values)]
    table = keyed_table(rows, schema, state, "string", "test")
    assert table.schema.names == schema.names  # a marker inside a map adds no column
    assert table.equals(_expected(rows, schema))
    # the rows are not changed by the conversion: the markers are still in their maps
    assert sum(v is MARKER for m in values for v in m.values()) == sum(
        v is MARKER for _, _, _, m in rows for v in m.values())


def test_a_marker_inside_a_map_is_null_there_and_the_rest_of_the_map_kept() -> None:
    state = StateMetadata("m", "keyed", "map", "int64", user_key_type="int32")
    schema = keyed_schema(state, "string")
    rows = [(0, "a", VOID_NAMESPACE, {1: 10, 2: MARKER}), (1, "b", VOID_NAMESPACE, {3: 30})]
    table = keyed_table(rows, schema, state, "string", "test")
    assert table.column("value").to_pylist() == [[(1, 10), (2, None)], [(3, 30)]]
