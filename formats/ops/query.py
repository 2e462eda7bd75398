"""SQL over snapshots: every state a table, read only when a query names it (``statectl query``).

DuckDB (an embedded SQL engine that scans Arrow tables without copying them) runs the query;
statectl gives it tables:

- ``"<operator>"."<state>"``: one table per state of every operator (keyed, operator and
  broadcast state), with the columns ``export`` writes (:mod:`formats.ops.export`: ``operator``,
  ``state``, ``subtask``, ``key_group``, ``key``, ``namespace``, ``value`` with its typed
  fields, ``ttl_timestamp``, and ``value_undecodable`` where values could not be decoded).
  ``<operator>`` is the operator's uid, else its name, else its OperatorID (text output names
  it so too); a name two operators share gets the OperatorID's first 8 digits after it.
- ``statectl.operators``, ``statectl.states``, ``statectl.subtasks``, ``statectl.key_groups``:
  the metadata, as Flink's ``savepoint_metadata()`` gives it and more (rows and bytes per key
  group).

Several snapshots at once: each is a DuckDB database of its own name (``--as old=PATH``), so
``old."purchases"."count"`` and ``new."purchases"."count"`` can be joined.

What is read: only the tables a query names (DuckDB's parser lists them). A table whose every
mention in the query is filtered on its ``key`` with ``=`` or ``IN`` and constants, in a
``WHERE`` whose top-level conjunction holds that filter, reads only those keys' key groups
(statectl's format: only their rows; a Flink snapshot is decoded whole when opened, so there the
filter saves the Arrow work, not the reading). The query itself still applies every filter:
pushdown only ever leaves out rows the query would drop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from formats.model.arrow_types import value_from_text
from formats.model.checkpoint import Checkpoint
from formats.model.columns import UNDECODABLE_COLUMN
from formats.open import shared_files_read_once
from formats.ops.export import (
    WINDOW_SPEC,
    WINDOW_TYPE,
    flat_table,
    is_time_window,
    jsonable,
    state_pieces,
    table_schema,
)
from formats.ops.query_sql import QueryError, lists_catalog, mentions, parse
from formats.ops.query_values import StateColumns, state_columns, table_values
from statecore.checkpoint import KeyedStateHandle, OperatorMetadata, StateMetadata
from statecore.errors import InvalidArgumentError, StorageError

__all__ = ["ALL_SNAPSHOTS", "METADATA_SCHEMA", "QueryError", "QueryResult", "SnapshotTables",
           "connect", "lists_catalog", "needs_decoding", "rows_per_key_group", "run_query",
           "state_table", "table_names", "write_result"]

#: The schema of the metadata tables in every snapshot's database.
METADATA_SCHEMA = "statectl"
#: The database whose tables hold every snapshot's rows of a state (several snapshots only).
ALL_SNAPSHOTS = "all_snapshots"
METADATA_TABLES = ("operators", "states", "subtasks", "key_groups")


@dataclass(frozen=True)
class StateTable:
    """One state as a table: ``schema_name``.``name`` (its operator's name and its own)."""

    schema_name: str
    name: str
    op: OperatorMetadata
    state: StateMetadata
    #: ``""``: the state's table; ``elements`` / ``entries``: its list elements / map entries
    #: flattened, a row each (:data:`FLATTENED`)
    flavor: str = ""


#: The flattened tables of keyed list and map states: kind -> (table suffix, flavor).
FLATTENED = {"list": ("$elements", "elements"), "map": ("$entries", "entries")}


@dataclass
class SnapshotTables:
    """The tables of one opened snapshot, by ``(schema, table)`` (case-insensitive)."""

    checkpoint: Checkpoint
    tables: dict[tuple[str, str], StateTable] = field(default_factory=dict)

    @classmethod
    def of(cls, checkpoint: Checkpoint) -> SnapshotTables:
        names = table_names(checkpoint)
        tables = {}
        for op in checkpoint.metadata.operators:
            for state in op.states:
                schema_name = names[op.identity.id]
                tables[schema_name.lower(), state.name.lower()] = StateTable(
                    schema_name, state.name, op, state)
                if state.scope == "keyed" and state.kind in FLATTENED:
                    suffix, flavor = FLATTENED[state.kind]
                    tables[schema_name.lower(), (state.name + suffix).lower()] = StateTable(
                        schema_name, state.name + suffix, op, state, flavor)
        return cls(checkpoint, tables)


def table_names(checkpoint: Checkpoint) -> dict[str, str]:
    """The schema name of each operator (by OperatorID): uid, else name, else OperatorID."""
    plain = {op.identity.id: op.identity.uid or op.identity.name or op.identity.id
             for op in checkpoint.metadata.operators}
    taken: dict[str, int] = {}
    for name in plain.values():
        taken[name.lower()] = taken.get(name.lower(), 0) + 1
    return {op_id: name if taken[name.lower()] == 1 and name.lower() != METADATA_SCHEMA
            else f"{name} {op_id[:8]}" for op_id, name in plain.items()}


@dataclass(frozen=True)
class QueryResult:
    """The result table, and what was read for it."""

    table: pa.Table
    #: ``(database, schema, table, key groups read or None for all)`` per table read
    read: tuple[tuple[str, str, str, tuple[int, ...] | None], ...]
    #: how the typed columns of the state tables read decode (:mod:`formats.ops.query_values`)
    sources: tuple[StateColumns, ...] = ()

    def values(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The rows (the first ``limit``) as statectl's values, as every command has them.

        Rendered by :func:`formats.ops.export.jsonable` (JSON) and ``cli.values.format_value``
        (text) like any value of state (:func:`formats.ops.query_values.table_values`).
        """
        table = self.table if limit is None else self.table.slice(0, limit)
        return table_values(table, self.sources)


# -- what a query names --------------------------------------------------------------------


def needs_decoding(sql: str) -> bool:
    """Whether ``sql`` needs a snapshot's keyed state decoded whole when it is opened.

    Only ``statectl.key_groups`` does: a Flink snapshot's rows per key group are known once
    its state is decoded. A state's table is decoded when the query reads it, and only the
    key groups its key filter names (:meth:`formats.model.checkpoint.Checkpoint.keyed_table_in`).
    """
    if "key_groups" not in sql.lower():
        return False  # cannot name it: no DuckDB started to parse the query (~30 ms)
    import duckdb

    connection = duckdb.connect(":memory:")
    try:
        named = mentions(parse(connection, sql), "")
    finally:
        connection.close()
    return any(m.schema == METADATA_SCHEMA and m.table == "key_groups" for m in named)


def _keyed_piece(checkpoint: Checkpoint, op: OperatorMetadata, handle: KeyedStateHandle,
                 key_groups: frozenset[int]) -> pa.Table | None:
    """The rows of ``handle`` in ``key_groups`` (:meth:`Checkpoint.keyed_table_in`)."""
    # only the handle's own: the keys of a filter may be held by several subtasks
    own = frozenset(g for g in key_groups if g in handle.key_group_range)
    if not own:
        return None
    table = checkpoint.keyed_table_in(op.uid, handle, own)
    return table if table.num_rows else None


def state_table(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata,
                key_groups: frozenset[int] | None = None,
                undecodable: bool | None = None) -> pa.Table:
    """One state's rows in ``export``'s columns; keyed state: only ``key_groups`` (None: all).

    ``undecodable``: whether the table has the ``value_undecodable`` column (default: whether
    the snapshot kept undecodable values of this state, or the rows read hold some: a Flink
    snapshot read without decoding knows only then).
    """
    read: list[tuple[int, pa.Table]] = []
    if key_groups is None or state.scope != "keyed":
        read = [(subtask, piece()) for subtask, piece in state_pieces(checkpoint, op, state)]
    else:
        for st in sorted(op.subtasks, key=lambda s: s.index):
            for handle in st.keyed:
                if handle.state != state.name:
                    continue
                piece = _keyed_piece(checkpoint, op, handle, key_groups)
                if piece is not None:
                    read.append((st.index, piece))
    if undecodable is None:
        undecodable = any(UNDECODABLE_COLUMN in table.column_names for _, table in read) or any(
            p.kept and (p.operator, p.state) == (op.uid, state.name)
            for p in checkpoint.undecodable_parts())
    schema = table_schema(op, state, undecodable)
    if is_time_window(checkpoint, op, state):  # as export's Parquet: namespace.start, .end
        schema = schema.set(schema.get_field_index("namespace"), pa.field(
            "namespace", WINDOW_TYPE, metadata={"statectl.type": WINDOW_SPEC}))
    pieces = [flat_table(schema, op, state, subtask, table) for subtask, table in read]
    return _with_parts(pa.concat_tables(pieces) if pieces else schema.empty_table())


def _with_parts(table: pa.Table) -> pa.Table:
    """A state's table with the parts of its namespace and key as columns of their own.

    ``window_start`` / ``window_end`` (TIMESTAMP, UTC) of a window namespace, and a column
    ``key_<field>`` per field of a composite key (a tuple's ``f0``, a POJO's fields).
    """
    namespace = table.schema.field("namespace").type
    if pa.types.is_struct(namespace) and namespace == WINDOW_TYPE:
        column = table.column("namespace")
        for bound in ("start", "end"):
            table = table.append_column(f"window_{bound}", pc.struct_field(
                column, bound).cast(pa.timestamp("ms", tz="UTC")))
    key = table.schema.field("key").type
    if pa.types.is_struct(key):
        column = table.column("key")
        for index in range(key.num_fields):
            name = f"key_{key.field(index).name}"
            if name not in table.column_names:
                table = table.append_column(name, pc.struct_field(column, index))
    return table


def _key_groups(checkpoint: Checkpoint, op: OperatorMetadata, keys: tuple[Any, ...] | None
                ) -> frozenset[int] | None:
    """The key groups of ``keys`` in ``op``; None: all (no filter, or a hash not known)."""
    if keys is None or op.key_type is None:
        return None
    groups = set()
    for key in keys:
        try:
            value = value_from_text(str(key), op.key_type)
        except InvalidArgumentError:
            return None  # a constant of another type: DuckDB decides what it matches
        group = checkpoint.key_group_of(op, value)
        if group is None:
            return None
        groups.add(group)
    return frozenset(groups)


def rows_per_key_group(checkpoint: Checkpoint, op: OperatorMetadata,
                        handle: KeyedStateHandle) -> list[tuple[int, int]]:
    """``(key group, rows)`` of one keyed handle: from the metadata, else by reading it."""
    if handle.rows:
        return [(r.key_group, r.row_count) for r in handle.rows]
    counts = pc.value_counts(checkpoint.keyed_table(op.uid, handle, []).column("key_group"))
    return sorted((int(c["values"].as_py()), int(c["counts"].as_py())) for c in counts)


def _metadata_tables(checkpoint: Checkpoint, names: dict[str, str], with_key_groups: bool
                     ) -> dict[str, pa.Table]:
    """``statectl.operators``, ``states``, ``subtasks``, ``key_groups`` of one snapshot.

    ``key_groups`` is empty unless ``with_key_groups`` (a Flink snapshot's rows per key group
    are known only once its state is decoded).
    """
    ops = checkpoint.metadata.operators
    operators = pa.Table.from_pylist([{
        "operator": names[op.identity.id], "operator_id": op.identity.id,
        "uid": op.identity.uid, "name": op.identity.name, "parallelism": op.parallelism,
        "max_parallelism": op.max_parallelism, "key_type": op.key_type,
        "states": len(op.states)} for op in ops], schema=pa.schema([
            ("operator", pa.string()), ("operator_id", pa.string()), ("uid", pa.string()),
            ("name", pa.string()), ("parallelism", pa.int32()),
            ("max_parallelism", pa.int32()), ("key_type", pa.string()),
            ("states", pa.int32())]))
    states = pa.Table.from_pylist([{
        "operator": names[op.identity.id], "state": s.name, "scope": s.scope, "kind": s.kind,
        "key_type": op.key_type if s.scope == "keyed" else s.user_key_type,
        "namespace_type": s.namespace_type, "value_type": s.value_type,
        "ttl_ms": s.ttl if isinstance(s.ttl, int) and not isinstance(s.ttl, bool) else None}
        for op in ops for s in op.states], schema=pa.schema([
            ("operator", pa.string()), ("state", pa.string()), ("scope", pa.string()),
            ("kind", pa.string()), ("key_type", pa.string()), ("namespace_type", pa.string()),
            ("value_type", pa.string()), ("ttl_ms", pa.int64())]))
    subtasks = pa.Table.from_pylist([{
        "operator": names[op.identity.id], "subtask": st.index,
        "key_group_start": None if st.key_group_range is None else st.key_group_range.start,
        "key_group_end": None if st.key_group_range is None else st.key_group_range.end,
        "keyed_handles": len(st.keyed), "operator_handles": len(st.operator)}
        for op in ops for st in op.subtasks], schema=pa.schema([
            ("operator", pa.string()), ("subtask", pa.int32()),
            ("key_group_start", pa.int32()), ("key_group_end", pa.int32()),
            ("keyed_handles", pa.int32()), ("operator_handles", pa.int32())]))
    groups: dict[tuple[str, str, int], list[int]] = {}
    for op in ops if with_key_groups else ():
        for st in op.subtasks:
            for handle in st.keyed:
                for group, count in rows_per_key_group(checkpoint, op, handle):
                    entry = groups.setdefault((names[op.identity.id], handle.state, group),
                                              [st.index, 0])
                    entry[1] += count
    key_groups = pa.Table.from_pylist([{
        "operator": operator, "state": state, "key_group": group, "subtask": subtask,
        "rows": rows} for (operator, state, group), (subtask, rows) in sorted(groups.items())],
        schema=pa.schema([("operator", pa.string()), ("state", pa.string()),
                          ("key_group", pa.int32()), ("subtask", pa.int32()),
                          ("rows", pa.int64())]))
    return {"operators": operators, "states": states, "subtasks": subtasks,
            "key_groups": key_groups}


def _list_unread(connection: Any, name: str, tables: SnapshotTables,
                 wanted: Mapping[tuple[str, str, str], Any]) -> None:
    """The tables a query does not read, listed with their columns but no rows.

    Each is a view of typed nulls that raises when a query scans it: statectl reads what a
    query names, so a scan of an unread table would be a wrong (empty) answer.
    """
    checkpoint = tables.checkpoint
    listed = []
    for table in tables.tables.values():
        if (name, table.schema_name.lower(), table.name.lower()) in wanted:
            continue
        data = _listed_table(checkpoint, table.op, table.state)
        if table.flavor:  # a flattened table's columns: the flattening's, of no rows
            connection.register("statectl_base", data)
            data = connection.sql(_flattened(table.flavor, data.schema)).to_arrow_table()
            connection.unregister("statectl_base")
        listed.append((table.schema_name, table.name, data))
    metadata = _metadata_tables(checkpoint, table_names(checkpoint), False)
    listed += [(METADATA_SCHEMA, t, data) for t, data in metadata.items()
               if (name, METADATA_SCHEMA, t) not in wanted]
    for schema_name, table_name, data in listed:
        target = f"{_quoted(name)}.{_quoted(schema_name)}.{_quoted(table_name)}"
        connection.register("statectl_listing", data)
        if schema_name == METADATA_SCHEMA and table_name != "key_groups":  # small, exact
            connection.execute(f"CREATE TABLE {target} AS SELECT * FROM "
                               "temp.main.statectl_listing")
        else:
            types = connection.execute("DESCRIBE temp.main.statectl_listing").fetchall()
            columns = ", ".join(
                ("NULL" if str(kind).strip('"') == "NULL" else f"CAST(NULL AS {kind})")
                + f" AS {_quoted(column)}" for column, kind, *_ in types)
            shown = f"{schema_name}.{table_name}".replace("'", "''")
            connection.execute(
                f"CREATE VIEW {target} AS SELECT {columns} WHERE error('statectl: {shown} "
                "was listed, not read; name it in the query to read it') IS NULL")
        connection.unregister("statectl_listing")


def _flattened(flavor: str, schema: pa.Schema) -> str:
    """SQL of a list state's elements or a map state's entries, a row each.

    From ``statectl_base`` (the state's table): ``position`` (0-based) or ``map_key``,
    ``value`` the element or entry value, ``ttl_timestamp`` its own last access.
    """
    ttl = schema.field("ttl_timestamp").type
    keep = "* EXCLUDE (value, ttl_timestamp)"
    if flavor == "elements":
        timed = pa.types.is_list(ttl) or pa.types.is_large_list(ttl)
        return (f"SELECT {keep}, unnest(range(len(value))) AS position, unnest(value) AS value, "
                + ("unnest(ttl_timestamp) AS ttl_timestamp" if timed
                   else "NULL AS ttl_timestamp")
                + " FROM temp.main.statectl_base WHERE value IS NOT NULL")
    timed = pa.types.is_map(ttl)
    inner = (f"SELECT {keep}, unnest(map_keys(value)) AS map_key, unnest(map_values(value)) "
             "AS value, " + ("ttl_timestamp AS ttl_map" if timed else "NULL AS ttl_map")
             + " FROM temp.main.statectl_base WHERE value IS NOT NULL")
    return ("SELECT * EXCLUDE (ttl_map), "
            + ("element_at(ttl_map, map_key)[1]" if timed else "NULL")
            + f" AS ttl_timestamp FROM ({inner})")


#: One state's rows read from one snapshot for :data:`ALL_SNAPSHOTS` alone (no view of its
#: own): its snapshot, its table, the rows.
_Pending = dict[tuple[str, str], dict[str, tuple[Checkpoint, StateTable, pa.Table]]]


def _union_views(connection: Any, catalog: _Catalog,
                 unions: Mapping[tuple[str, str], list[str]], pending: _Pending) -> None:
    """:data:`ALL_SNAPSHOTS`: a view per state, every snapshot's rows that has it, labelled.

    The rows read for the union alone (``pending``) are put together here, with their
    ``snapshot`` column, into one Arrow table that DuckDB scans in place: the union of 20
    snapshots costs one view, not 20 and a view over them. Where their columns cannot be
    unified by name, each is given a view of its own and the union is DuckDB's.
    """
    databases = catalog.databases
    connection.execute(f"ATTACH ':memory:' AS {ALL_SNAPSHOTS}")
    for (schema, table), names in unions.items():
        if not names:
            continue
        found = databases[names[0]].tables[(schema, table)]
        connection.execute(f"CREATE SCHEMA IF NOT EXISTS {ALL_SNAPSHOTS}."
                           f"{_quoted(found.schema_name)}")
        target = f"{ALL_SNAPSHOTS}.{_quoted(found.schema_name)}.{_quoted(found.name)}"
        parts = pending.get((schema, table), {})
        together = _together([(n, parts[n][2]) for n in names]) if set(names) <= set(
            parts) else None
        if together is not None:
            view = f"statectl_all_{len(catalog.sources)}_{len(catalog.read)}"
            connection.register(view, together)
            connection.execute(f"CREATE VIEW {target} AS SELECT * FROM temp.main.{view}")
            types = _types(connection, view)
            for name in names:
                checkpoint, state, _ = parts[name]
                catalog.sources.append(_columns(checkpoint, state, types))
            continue
        for name, (checkpoint, state, data) in parts.items():  # a view each, as if named
            _create(connection, catalog, name, checkpoint, state, data, False)
        union = " UNION ALL BY NAME ".join(
            f"SELECT '{n}' AS snapshot, * FROM {_quoted(n)}."
            f"{_quoted(databases[n].tables[(schema, table)].schema_name)}."
            f"{_quoted(databases[n].tables[(schema, table)].name)}" for n in names)
        connection.execute(f"CREATE VIEW {target} AS {union}")


def _together(tables: list[tuple[str, pa.Table]]) -> pa.Table | None:
    """``tables`` one after the other, a ``snapshot`` column first.

    ``None`` if their columns cannot be unified by name (as ``UNION ALL BY NAME`` would).
    """
    labelled = [data.add_column(0, "snapshot", pa.array([name] * data.num_rows, pa.string()))
                for name, data in tables]
    try:
        return pa.concat_tables(labelled, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _types(connection: Any, view: str) -> dict[str, pa.DataType]:
    """The columns' types of a registered table as DuckDB gives them back."""
    schema = connection.sql(f"SELECT * FROM temp.main.{view} LIMIT 0").to_arrow_table().schema
    return {f.name: f.type for f in schema}


def _columns(checkpoint: Checkpoint, state: StateTable, types: Mapping[str, pa.DataType]
             ) -> StateColumns:
    """How a state table's columns of ``types`` read back (:func:`state_columns`)."""
    columns = state_columns(checkpoint, state.op, state.state, types)
    if state.flavor:  # an element's, an entry's value: read by its own type
        columns = StateColumns(columns.types, {k: v for k, v in columns.readers.items()
                                               if k not in ("value", "ttl_timestamp")})
    return columns


def _create(connection: Any, catalog: _Catalog, name: str, checkpoint: Checkpoint,
            state: StateTable, data: pa.Table, listing: bool) -> None:
    """A state's table in database ``name``: its rows ``data``, its columns in the sources.

    A view of the Arrow table (DuckDB scans it in place, nothing copied), or with
    ``listing`` a table of its own (the registration would be listed too).
    """
    view = f"statectl_{len(catalog.read)}_{len(catalog.sources)}"
    connection.register(view, data)  # its schema: made with the database's (_fill)
    target = f"{_quoted(name)}.{_quoted(state.schema_name)}.{_quoted(state.name)}"
    # the columns' types as DuckDB gives them back: a result column of one of them is read
    # as the state's column (formats.ops.query_values)
    catalog.sources.append(_columns(checkpoint, state, _types(connection, view)))
    if listing:
        connection.execute(f"CREATE TABLE {target} AS SELECT * FROM temp.main.{view}")
        connection.unregister(view)
    else:
        connection.execute(f"CREATE VIEW {target} AS SELECT * FROM temp.main.{view}")


def write_result(result: QueryResult, path: str) -> None:
    """Write a result to a local ``path``: Parquet, CSV or JSON Lines by extension.

    Parquet keeps DuckDB's Arrow types. JSON Lines and CSV hold values as ``export`` writes
    them (:func:`formats.ops.export.jsonable` of :meth:`QueryResult.values`: non-finite floats as
    the ``NaN``/``Infinity`` literals; CSV: strings as they are, other values as JSON text).
    The file is written under a temporary name beside ``path`` and renamed to it when
    complete: a failure leaves no file (and an existing ``path`` as it was). An OSError is a
    :class:`~statecore.errors.StorageError`.
    """
    import os
    import uuid

    folder, name = os.path.split(os.path.abspath(path))
    staging = os.path.join(folder, f".{name}.{uuid.uuid4().hex[:12]}.partial")
    try:
        _write_file(result, staging, path)
        os.replace(staging, path)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if os.path.exists(staging):
            os.unlink(staging)


def _write_file(result: QueryResult, staging: str, path: str) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if path.endswith(".parquet"):
        pq.write_table(result.table, staging)
        return
    rows = [{name: jsonable(value, strict=False) for name, value in row.items()}
            for row in result.values()]
    if path.endswith(".jsonl"):
        with open(staging, "w", encoding="utf-8", newline="") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return

    def cell(value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False)  # numbers, booleans and nested as JSON

    columns = {name: pa.array([cell(row[name]) for row in rows], pa.string())
               for name in result.table.column_names}
    pacsv.write_csv(pa.table(columns), staging)


def _listed_table(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata
                  ) -> pa.Table:
    """A state's columns without its rows, for a listing (:func:`run_query`).

    One row of nulls, whose types the listing's view takes. ``value_undecodable`` is listed
    where statectl already knows the state holds undecodable values (a Flink snapshot read
    without decoding: once read).
    """
    undecodable = any(p.kept and (p.operator, p.state) == (op.uid, state.name)
                      for p in checkpoint.undecodable_parts())
    schema = table_schema(op, state, undecodable)
    if is_time_window(checkpoint, op, state):
        schema = schema.set(schema.get_field_index("namespace"), pa.field(
            "namespace", WINDOW_TYPE, metadata={"statectl.type": WINDOW_SPEC}))
    return _with_parts(pa.table([pa.nulls(1, f.type) for f in schema], schema=schema))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_DUCKDB_ERROR = re.compile(r"^\w+ Error: ", re.ASCII)


def _listing(databases: Mapping[str, SnapshotTables], default: str) -> str:
    """The tables a query can name, the first few, for an error message."""
    names = [f"{'' if database == default else database + '.'}"
             f"{_quoted(t.schema_name)}.{_quoted(t.name)}"
             for database, tables in databases.items() for t in tables.tables.values()]
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return f"{shown or 'no state'}; {METADATA_SCHEMA}.states lists them"


@dataclass
class _Catalog:
    """The databases of a connection and what was read into them."""

    databases: dict[str, SnapshotTables]
    default: str
    read: list[tuple[str, str, str, tuple[int, ...] | None]] = field(default_factory=list)
    sources: list[StateColumns] = field(default_factory=list)


def _attach(connection: Any, snapshots: Mapping[str, Checkpoint], default: str | None,
            extra: Mapping[str, pa.Table] | None) -> _Catalog:
    """One database per snapshot, the ``extra`` tables in the default one's ``main``."""
    databases = {name.lower(): SnapshotTables.of(cp) for name, cp in snapshots.items()}
    if ALL_SNAPSHOTS in databases:
        raise QueryError(f"SQL: {ALL_SNAPSHOTS!r} names every snapshot's tables together: "
                         "give the snapshot another name")
    if databases:  # one statement for all: each costs DuckDB's round trip
        connection.execute("; ".join(f"ATTACH ':memory:' AS {_quoted(name)}"
                                     for name in databases))
    default_database = (default or next(iter(databases))).lower()
    connection.execute(f"USE {_quoted(default_database)}")
    for table_name, data in (extra or {}).items():
        connection.register("statectl_extra", data)
        connection.execute(f"CREATE TABLE {_quoted(default_database)}.main."
                           f"{_quoted(table_name)} AS SELECT * FROM temp.main.statectl_extra")
        connection.unregister("statectl_extra")
    return _Catalog(databases, default_database)


def _fill(connection: Any, catalog: _Catalog, wanted: Mapping[tuple[str, str, str], Any],
          unions: Mapping[tuple[str, str], list[str]], listing: bool,
          progress: Callable[[str], None] | None,
          union_only: frozenset[tuple[str, str, str]] = frozenset()) -> None:
    """Read the ``wanted`` tables into their databases.

    ``wanted``: ``(database, schema, table)`` -> its key filter or ``None``. With ``listing``
    the others are listed (:func:`_list_unread`); ``unions`` are the :data:`ALL_SNAPSHOTS`
    views to create; the ``union_only`` tables are read for them alone (no view of their own).
    """
    read = catalog.read
    pending: _Pending = {}
    # every schema of every database: DuckDB's errors then name the table (one statement)
    if catalog.databases:
        connection.execute("; ".join(
            f"CREATE SCHEMA {_quoted(name)}.{_quoted(schema_name)}"
            for name, tables in catalog.databases.items()
            for schema_name in sorted({t.schema_name for t in tables.tables.values()}
                                      | {METADATA_SCHEMA})))
    for name, tables in catalog.databases.items():
        checkpoint = tables.checkpoint
        undecodable = {(p.operator, p.state) for p in checkpoint.undecodable_parts()
                       if p.kept}
        metadata = None
        for (database, schema, table), keys in wanted.items():
            if database != name:
                continue
            if schema == METADATA_SCHEMA and table in METADATA_TABLES:
                if metadata is None:
                    metadata = _metadata_tables(
                        checkpoint, table_names(checkpoint),
                        (name, METADATA_SCHEMA, "key_groups") in wanted)
                read.append((name, METADATA_SCHEMA, table, None))
                view = f"statectl_{len(read)}"
                connection.register(view, metadata[table])
                target = f"{_quoted(name)}.{METADATA_SCHEMA}.{_quoted(table)}"
                if listing:  # a table of its own: the registration would be listed too
                    connection.execute(f"CREATE TABLE {target} AS SELECT * FROM "
                                       f"temp.main.{view}")
                    connection.unregister(view)
                else:
                    connection.execute(f"CREATE VIEW {target} AS SELECT * FROM "
                                       f"temp.main.{view}")
                continue
            found = tables.tables.get((schema, table))
            if found is None:
                continue  # not a state: DuckDB says what is missing
            groups = _key_groups(checkpoint, found.op, None if keys is None else tuple(keys))
            if progress is not None:
                progress(f"{found.schema_name}/{found.name}")
            # None: the rows read say (a Flink snapshot read without decoding)
            data = state_table(checkpoint, found.op, found.state, groups,
                               (found.op.uid, found.state.name) in undecodable or None)
            if found.flavor:
                connection.register("statectl_base", data)
                data = connection.sql(_flattened(found.flavor, data.schema)).to_arrow_table()
                connection.unregister("statectl_base")
            read.append((name, found.schema_name, found.name,
                         None if groups is None else tuple(sorted(groups))))
            if (database, schema, table) in union_only and not listing:
                pending.setdefault((schema, table), {})[name] = (checkpoint, found, data)
            else:
                _create(connection, catalog, name, checkpoint, found, data, listing)
        if listing:
            _list_unread(connection, name, tables, wanted)
    if unions:
        _union_views(connection, catalog, unions, pending)


def connect(snapshots: Mapping[str, Checkpoint], *, default: str | None = None,
            extra: Mapping[str, pa.Table] | None = None) -> Any:
    """A DuckDB connection holding every table :func:`run_query` gives, read now.

    For a notebook: join state with pandas, Polars or Arrow data in DuckDB. Every state of
    every snapshot is read when connecting (``statectl query`` reads only what a query names:
    prefer it, or fewer snapshots, for big state). The caller closes the connection.
    """
    import duckdb

    connection = duckdb.connect(":memory:")
    try:
        catalog = _attach(connection, snapshots, default, extra)
        wanted: dict[tuple[str, str, str], Any] = {
            (name, schema, table): None for name, tables in catalog.databases.items()
            for (schema, table) in tables.tables}
        wanted.update({(name, METADATA_SCHEMA, table): None for name in catalog.databases
                       for table in METADATA_TABLES})
        unions: dict[tuple[str, str], list[str]] = {}
        if len(catalog.databases) > 1:
            for name, tables in catalog.databases.items():
                for key in tables.tables:
                    unions.setdefault(key, []).append(name)
        _fill(connection, catalog, wanted, unions, False, None)
    except BaseException:
        connection.close()
        raise
    return connection


def run_query(snapshots: Mapping[str, Checkpoint], sql: str, *, default: str | None = None,
              progress: Callable[[str], None] | None = None,
              extra: Mapping[str, pa.Table] | None = None) -> QueryResult:
    """Run ``sql`` over ``snapshots`` (database name → opened snapshot); the result table.

    ``default``: the database unqualified names refer to (default: the first). ``extra``:
    tables of the default database's ``main`` schema (``snapshots``: :mod:`formats.ops.catalog`).
    With several snapshots, :data:`ALL_SNAPSHOTS` holds each state's rows of every snapshot
    that has it, a ``snapshot`` column first (the database's name). A SQL error (DuckDB's
    message) is a :class:`QueryError`.
    """
    import duckdb  # only this command needs it

    connection = duckdb.connect(":memory:")
    try:
        if re.fullmatch(r"\s*show\s+tables\s*;?\s*", sql, re.IGNORECASE):
            sql = "SHOW ALL TABLES"  # every state is a table of its operator's schema
        tree = parse(connection, sql)
        catalog = _attach(connection, snapshots, default, extra)
        databases, default_database = catalog.databases, catalog.default
        wanted: dict[tuple[str, str, str], set[Any] | None] = {}
        unions: dict[tuple[str, str], list[str]] = {}
        direct: set[tuple[str, str, str]] = set()  # named in a database, not in the union
        for mention in mentions(tree, default_database):
            found_in = [mention.database]
            if mention.database == ALL_SNAPSHOTS and len(databases) > 1:
                found_in = [n for n, t in databases.items()
                            if (mention.schema, mention.table) in t.tables]
                unions[(mention.schema, mention.table)] = found_in
            else:
                direct.add((mention.database, mention.schema, mention.table))
            for database in found_in:
                key = (database, mention.schema, mention.table)
                if key in wanted and wanted[key] is None:
                    continue
                wanted[key] = None if mention.keys is None else (
                    (wanted.get(key) or set()) | set(mention.keys))
        # RocksDB incremental checkpoints of one job share SST files: read once for all
        with shared_files_read_once() if len(databases) > 1 else nullcontext():
            _fill(connection, catalog, wanted, unions, lists_catalog(tree), progress,
                  frozenset(wanted.keys() - direct))
        try:
            relation = connection.sql(sql)
            if relation is None:
                raise QueryError("SQL: the statement returns no rows (give a query)")
            result = relation.to_arrow_table()
        except duckdb.Error as exc:
            message = _DUCKDB_ERROR.sub("", str(exc)).splitlines()[0]
            if isinstance(exc, duckdb.CatalogException):
                message += f" (the tables: {_listing(databases, default_database)})"
            raise QueryError(f"SQL: {message}") from exc
        return QueryResult(result, tuple(catalog.read), tuple(catalog.sources))
    finally:
        connection.close()
