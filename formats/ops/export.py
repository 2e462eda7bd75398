"""``statectl export``: every state of a checkpoint as one flat table, in Parquet, JSONL or CSV.

One file per state, ``<operator uid>/<state>.<ext>`` (names made filesystem-safe), and an
``_export.json`` manifest listing them with their row counts. Every table has the columns

===============  ==============================================================================
operator         the operator's uid (string)
state            the state's name (string)
subtask          the subtask holding the row (int32)
key_group        keyed state: the row's key group (int32); operator state: null
key              keyed state: the key; broadcast state: the map key; list state: null
namespace        the namespace (null for state without one)
value            the value: list state a list, map state a map, as stored
ttl_timestamp    TTL state: last-access time(s) in epoch ms, parallel to the value; else null
===============  ==============================================================================

Parquet keeps the Arrow types of the checkpoint's columns (a ``null`` column where a state has
no key, namespace or TTL; nanosecond timestamps in microseconds when no value has a finer
digit, as Spark reads no ``TIMESTAMP(NANOS)``), and each ``key``, ``namespace``, ``value`` and
``ttl_timestamp`` field carries its statectl type spec in the field metadata
``statectl.type`` (a POJO's fields, an enum's constants, a Kryo value's class). JSON Lines
and CSV have no such types; they hold the canonical JSON forms of :func:`jsonable`
(docs/flink-types.md): bytes base64, tuples arrays, structs (POJOs) and maps JSON objects (an
array of ``{"key", "value"}`` objects when the keys are not strings), enums their constant
names, instants epoch milliseconds, dates ``YYYY-MM-DD``, non-finite floats the literals
``NaN``, ``Infinity`` and ``-Infinity`` (outside strict JSON, but what Python's json, pyarrow
and pandas read back as floats, so a column keeps one type); CSV holds nested values (lists,
maps, tuples, structs) as JSON text.

Rows are what a job restoring the checkpoint sees, as ``statectl diff`` compares them: keyed
entries per subtask, split list elements per subtask, union list state once per distinct range
(every subtask restores it whole) and broadcast state from the first subtask's copy. The output
directory is written in a staging sibling and renamed into place when complete; an existing
one is refused. The checkpoint is never modified.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import re
import time
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import groupby
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from formats.model.arrow_types import arrow_type, from_arrow, pyrows
from formats.model.checkpoint import Checkpoint
from formats.model.columns import (
    UNDECODABLE_COLUMN,
    UNDECODABLE_FIELD,
    operator_schema,
    ttl_spec,
    undecodable_of,
    value_spec,
)
from formats.model.json_contract import SCHEMA_VERSION
from formats.ops.key_group_runs import keyed_runs
from formats.ops.parallel_reads import read_units, worker_count
from formats.ops.state_scan import check_states
from formats.storage.commit import commit, staged
from formats.storage.filesystems import resolve_filesystem, storage_errors
from statecore.checkpoint import (
    OperatorIdentity,
    OperatorMetadata,
    StateMetadata,
    operator_state_segments,
)
from statecore.errors import CheckpointError, InvalidArgumentError
from statecore.undecodable import Undecodable
from statecore.values import Instant, LocalDateTime, LocalTime, TimeWindow

__all__ = ["FORMATS", "ExportResult", "ExportedTable", "StateExport", "StateWriter",
           "column_decoders", "flat_table", "state_pieces", "table_schema",
           "StatesWriter", "export_checkpoint", "in_microseconds", "jsonable", "temporal_json",
           "undecodable_json",
           "whole_microseconds", "write_state_locally", "write_states_locally"]

#: Output formats and their file extensions.
FORMATS = {"parquet": "parquet", "jsonl": "jsonl", "csv": "csv"}
MANIFEST = "_export.json"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ExportedTable:
    """One exported state: its file (relative to the export directory) and rows."""

    operator: OperatorIdentity
    state: str
    scope: str
    kind: str
    path: str
    rows: int

    def to_json(self) -> dict[str, Any]:
        """The table in the JSON contract (``docs/schema/export.json``: ``location``)."""
        return {"operator": self.operator.to_json(), "state": self.state, "scope": self.scope,
                "kind": self.kind, "location": self.path, "rows": self.rows}


@dataclass(frozen=True)
class ExportResult:
    """What ``export`` wrote."""

    location: str
    format: str
    tables: tuple[ExportedTable, ...]
    seconds: float

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def table_schema(op: OperatorMetadata, state: StateMetadata, undecodable: bool = False
            ) -> pa.Schema:
    if state.scope == "keyed":
        assert op.key_type is not None
        key_spec: str | None = op.key_type
        value_type = value_spec(state)
    else:
        key_spec, value_type = state.user_key_type, state.value_type
    namespace = None if state.namespace_type == "void" else state.namespace_type
    ttl = ttl_spec(state) if state.ttl else None
    return pa.schema([("operator", pa.string()), ("state", pa.string()),
                      ("subtask", pa.int32()), ("key_group", pa.int32()),
                      _typed_field("key", key_spec), _typed_field("namespace", namespace),
                      _typed_field("value", value_type), _typed_field("ttl_timestamp", ttl),
                      *([UNDECODABLE_FIELD] if undecodable else [])])


def _typed_field(name: str, spec: str | None) -> pa.Field:
    """A column of type ``spec`` (``None``: a null column), the spec in its metadata."""
    if spec is None:
        return pa.field(name, pa.null())
    return pa.field(name, arrow_type(spec), metadata={"statectl.type": spec})


def flat_table(schema: pa.Schema, op: OperatorMetadata, state: StateMetadata, subtask: int,
          table: pa.Table) -> pa.Table:
    """A stored table (keyed or operator columns) in the export's flat columns."""
    n = table.num_rows
    columns = []
    for field in schema:
        if field.name == "operator":
            columns.append(pa.array([op.uid] * n, pa.string()))
        elif field.name == "state":
            columns.append(pa.array([state.name] * n, pa.string()))
        elif field.name == "subtask":
            columns.append(pa.array([subtask] * n, pa.int32()))
        elif field.name in table.column_names:
            columns.append(_renamed(table.column(field.name), field.type).cast(field.type))
        else:
            columns.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


#: A Flink ``TimeWindow`` namespace in an exported Parquet file: ``[start, end)`` in epoch ms
#: (stored as the tuple ``f0, f1``; JSON Lines and CSV write it as the array ``[start, end]``).
WINDOW_TYPE = pa.struct([("start", pa.int64()), ("end", pa.int64())])
WINDOW_SPEC = "tuple<int64,int64>"


def _renamed(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """A struct column with ``target``'s field names (a window's f0, f1 as start, end)."""
    source = column.type
    if not (pa.types.is_struct(source) and pa.types.is_struct(target)) or \
            source.num_fields != target.num_fields or source == target or all(
            source.field(i).name == target.field(i).name for i in range(source.num_fields)):
        return column
    names = [target.field(i).name for i in range(target.num_fields)]
    return pa.chunked_array([pa.StructArray.from_arrays(
        [chunk.field(i) for i in range(source.num_fields)], names=names,
        mask=chunk.is_null() if chunk.null_count else None) for chunk in column.chunks],
        pa.struct([pa.field(n, source.field(i).type) for i, n in enumerate(names)]))


def is_time_window(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata) -> bool:
    """Whether ``state``'s namespaces are Flink ``TimeWindow``s (not any pair of longs)."""
    if state.namespace_type != WINDOW_SPEC:
        return False
    read = checkpoint.namespace_reader(op, state)
    return read is not None and isinstance(read({"f0": 0, "f1": 0}), TimeWindow)


def state_pieces(checkpoint: Checkpoint, op: OperatorMetadata, state: StateMetadata
            ) -> Iterator[tuple[int, Callable[[], pa.Table]]]:
    """``(subtask, read)`` per stored piece of ``state`` (see the module doc for which).

    A keyed state's handle is read in runs of key groups
    (:func:`formats.ops.key_group_runs.keyed_runs`).
    """
    if state.scope == "keyed":
        for st in sorted(op.subtasks, key=lambda s: s.index):
            for h in st.keyed:
                if h.state == state.name:
                    for _, read in keyed_runs(checkpoint, op.uid, h):
                        yield st.index, read
        return
    segments = operator_state_segments(op, state.name, distinct=state.kind != "split")
    if state.kind == "broadcast" and segments:
        segments = [(s, h) for s, h in segments if s == segments[0][0]]
    for subtask, o in segments:
        yield subtask, partial(checkpoint.rows_table, o.file, operator_schema(state),
                               o.first_element, o.element_count)


def jsonable(value: Any, *, strict: bool = True) -> Any:
    """A decoded value as JSON can hold it: the canonical JSON forms (docs/flink-types.md).

    Tuples (Flink tuple and row keys, window namespaces) are arrays; structs (POJOs) and maps
    with string keys objects, other maps arrays of ``{"key", "value"}`` objects; an enum is its
    constant's name; an instant (``timestamp``) its epoch milliseconds; a date ``YYYY-MM-DD``;
    a local time or date-time its ISO-8601 text; a ``decimal`` its exact text; bytes base64.
    ``strict``: non-finite floats become the strings ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"`` (standard JSON, for documents); otherwise they stay floats, which
    ``json.dumps`` writes as the ``NaN``/``Infinity`` literals that Python's json, pyarrow and
    pandas read back as floats (what export's JSON Lines and CSV use, so a float column keeps
    one type).
    """
    if type(value) is Undecodable:
        return undecodable_json(value)
    if isinstance(value, float) and not math.isfinite(value):
        if not strict:
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list | tuple):
        return [jsonable(v, strict=strict) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: jsonable(v, strict=strict) for k, v in value.items()}
        return [{"key": jsonable(k, strict=strict), "value": jsonable(v, strict=strict)}
                for k, v in value.items()]
    return temporal_json(value)


def undecodable_json(marker: Undecodable) -> dict[str, Any]:
    """A value statectl could not decode, as JSON shows it (docs/flink-types.md)."""
    return {"undecodable": True, "class": marker.class_name, "serializer": marker.serializer,
            "reason": marker.reason, "damaged": marker.damaged,
            "bytes": None if marker.data is None else base64.b64encode(marker.data).decode()}


def temporal_json(value: Any) -> Any:
    """The JSON form of an instant, date, time or decimal (others: ``value`` unchanged)."""
    if isinstance(value, Instant):
        return value.epoch_milli
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, LocalTime | LocalDateTime | decimal.Decimal):
        return str(value)
    return value


def column_decoders(op: OperatorMetadata, state: StateMetadata
                    ) -> dict[str, Callable[[Any], Any]]:
    """How each column's ``to_pylist`` values decode to statectl's Python values."""
    identity: Callable[[Any], Any] = lambda v: v  # noqa: E731
    key_spec = op.key_type if state.scope == "keyed" else state.user_key_type
    return {
        "key": from_arrow(key_spec) if key_spec else identity,
        "namespace": identity if state.namespace_type == "void" else from_arrow(
            state.namespace_type),
        "value": from_arrow(value_spec(state) if state.scope == "keyed" else state.value_type),
        "ttl_timestamp": from_arrow(ttl_spec(state)) if state.ttl else identity,
    }


class _Writer:
    """One output file of ``fmt``, written table by table."""

    def __init__(self, fs: pafs.FileSystem, path: str, fmt: str, schema: pa.Schema,
                 decoders: dict[str, Callable[[Any], Any]]) -> None:
        self.fmt, self.decoders = fmt, decoders
        self.stream = fs.open_output_stream(path)
        self.parquet = pq.ParquetWriter(self.stream, schema) if fmt == "parquet" else None
        self.csv: pacsv.CSVWriter | None = None
        self.rows = 0

    def _plain(self, table: pa.Table) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = pyrows(table)
        for row in rows:
            marker = undecodable_of(row)
            for name, decode in self.decoders.items():
                if row.get(name) is not None:
                    row[name] = jsonable(decode(row[name]), strict=False)
            if UNDECODABLE_COLUMN in row:  # JSON and CSV: the value is the marker's object
                del row[UNDECODABLE_COLUMN]
                if marker is not None:
                    row["value"] = undecodable_json(marker)
        return rows

    def write(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        if self.parquet is not None:
            self.parquet.write_table(table)
        elif self.fmt == "jsonl":
            for row in self._plain(table):
                self.stream.write(json.dumps(row, ensure_ascii=False).encode() + b"\n")
        else:
            self._write_csv(table)

    def _write_csv(self, table: pa.Table) -> None:
        # nested and binary values as JSON text; instants and times in their JSON forms too
        textual = [f.name for f in table.schema if pa.types.is_nested(f.type)
                   or pa.types.is_binary(f.type) or pa.types.is_timestamp(f.type)
                   or pa.types.is_time(f.type)]
        flat = table
        if textual:
            rows = self._plain(table.select(textual))
            for name in textual:
                text = [None if r[name] is None else r[name] if isinstance(r[name], str)
                        else json.dumps(r[name], ensure_ascii=False)
                        for r in rows]
                flat = flat.set_column(flat.schema.get_field_index(name), name,
                                       pa.array(text, pa.string()))
        if self.csv is None:
            self.csv = pacsv.CSVWriter(self.stream, flat.schema)
        self.csv.write_table(flat)

    def close(self) -> None:
        if self.parquet is not None:
            self.parquet.close()
        if self.csv is not None:
            self.csv.close()
        self.stream.close()


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _file_name(taken: set[str], uid: str, state: str, ext: str) -> str:
    def safe(name: str) -> str:
        cleaned = _UNSAFE.sub("_", name).lstrip(".") or "_"
        return cleaned[:100]
    base = f"{safe(uid)}/{safe(state)}"
    name, n = f"{base}.{ext}", 1
    while name in taken:
        n += 1
        name = f"{base}-{n}.{ext}"
    taken.add(name)
    return name


@dataclass(frozen=True)
class StateExport:
    """One state to export: where its table goes and the stored pieces to read.

    ``microseconds``: nanosecond timestamps are written as microseconds (Parquet readers such
    as Spark refuse ``TIMESTAMP(NANOS)``); set only when no value has a finer digit.
    """

    op: OperatorMetadata
    state: StateMetadata
    fmt: str
    fs: pafs.FileSystem
    staging: str
    path: str  # relative to the export directory
    pieces: tuple[tuple[int, Callable[[], pa.Table]], ...]  # (subtask, read)
    microseconds: bool = False
    #: some values could not be decoded: a ``value_undecodable`` column follows ``value``
    undecodable: bool = False
    #: the namespaces are Flink ``TimeWindow``s: Parquet names their fields start and end
    windows: bool = False

    @property
    def schema(self) -> pa.Schema:
        schema = table_schema(self.op, self.state, self.undecodable)
        if self.windows and self.fmt == "parquet":
            index = schema.get_field_index("namespace")
            schema = schema.set(index, pa.field("namespace", WINDOW_TYPE, metadata={
                "statectl.type": WINDOW_SPEC, "statectl.window": "TimeWindow [start, end)"}))
        return in_microseconds(schema) if self.microseconds else schema

    def open_writer(self, path: str | None = None) -> _Writer:
        """A writer of the file at ``path`` (relative; default :attr:`path`), in staging."""
        path = self.path if path is None else path
        self.fs.create_dir(f"{self.staging}/{path.rsplit('/', 1)[0]}", recursive=True)
        return _Writer(self.fs, f"{self.staging}/{path}", self.fmt, self.schema,
                       column_decoders(self.op, self.state))

    def flat(self, subtask: int, table: pa.Table) -> pa.Table:
        """A piece read, in this export's columns (:func:`flat_table`)."""
        return flat_table(self.schema, self.op, self.state, subtask, table)

    def recast(self) -> None:
        """Rewrite the Parquet file written at :attr:`path` in :attr:`schema` (microseconds).

        Copied row group by row group: memory holds one.
        """
        written = f"{self.staging}/{self.path}"
        cast = f"{written}.us"
        with self.fs.open_input_file(written) as source:
            stored = pq.ParquetFile(source)
            with self.fs.open_output_stream(cast) as stream, \
                    pq.ParquetWriter(stream, self.schema) as writer:
                for index in range(stored.num_row_groups):
                    writer.write_table(stored.read_row_group(index).cast(self.schema))
        self.fs.move(cast, written)

    def write(self, path: str, pieces: Sequence[tuple[int, Callable[[], pa.Table]]],
              done: Callable[[], None] = lambda: None) -> int:
        """Write ``pieces`` as one file at ``path`` (relative); the rows written."""
        writer = self.open_writer(path)
        try:
            if not pieces:
                writer.write(self.schema.empty_table())
            for subtask, read in pieces:
                writer.write(self.flat(subtask, read()))
                done()
        finally:
            writer.close()
        return writer.rows


def _micro(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with nanosecond timestamps in microseconds (time zone kept)."""
    if pa.types.is_timestamp(data_type) and data_type.unit == "ns":
        return pa.timestamp("us", tz=data_type.tz)
    if pa.types.is_struct(data_type):
        return pa.struct([data_type.field(i).with_type(_micro(data_type.field(i).type))
                          for i in range(data_type.num_fields)])
    if pa.types.is_map(data_type):
        return pa.map_(_micro(data_type.key_type), _micro(data_type.item_type))
    if pa.types.is_list(data_type):
        return pa.list_(data_type.value_field.with_type(_micro(data_type.value_type)))
    return data_type


def in_microseconds(schema: pa.Schema) -> pa.Schema:
    """``schema`` with nanosecond timestamps in microseconds (the same when it has none)."""
    return pa.schema([f.with_type(_micro(f.type)) for f in schema], metadata=schema.metadata)


def whole_microseconds(table: pa.Table) -> bool:
    """Whether every nanosecond timestamp of ``table`` is a whole microsecond."""
    try:
        for field in table.schema:
            table.column(field.name).cast(_micro(field.type), safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _microseconds_suffice(schema: pa.Schema,
                          pieces: Sequence[tuple[int, Callable[[], pa.Table]]]) -> bool:
    """Whether every nanosecond timestamp of the pieces is a whole microsecond."""
    if in_microseconds(schema).equals(schema):
        return False
    return all(whole_microseconds(read()) for _, read in pieces)


#: Writes one state's table; returns its path (relative) and rows. Local: one file.
StateWriter = Callable[[StateExport, Callable[[], None]], tuple[str, int]]


def write_state_locally(task: StateExport, done: Callable[[], None]) -> tuple[str, int]:
    """One state's pieces, one after the other, into one file."""
    return task.path, task.write(task.path, task.pieces, done)


def write_states_locally(tasks: Sequence[StateExport], done: Callable[[], None],
                         checkpoint: Checkpoint | None = None, workers: int | None = None
                         ) -> list[tuple[str, int]]:
    """The local engine: each operator's states written together, piece by piece.

    The states of an operator are written side by side, their pieces in the order (subtask,
    run of key groups): every state's rows of a run are read before the next run's, so a
    snapshot read piece by piece decodes each run once and holds only it. A state whose values
    turn out not all decodable (known only once read) gets its ``value_undecodable`` column:
    its file is begun again with it. Parquet: a state's nanosecond timestamps are rewritten as
    microseconds once all its rows are written and every one is a whole microsecond (the file
    copied row group by row group), as :func:`export_checkpoint` decides for other writers.

    With ``checkpoint`` (the one the pieces read), the runs are read by worker processes on
    every core (:mod:`formats.ops.parallel_reads`; ``workers``: how many, default
    :func:`~formats.ops.parallel_reads.worker_count`'s), each run's states by one worker, and
    written here in the same order.
    """
    out: dict[int, tuple[str, int]] = {}
    by_operator: dict[str, list[int]] = {}
    for i, task in enumerate(tasks):
        by_operator.setdefault(task.op.uid, []).append(i)
    for indexes in by_operator.values():
        writers: dict[int, _Writer] = {}
        chosen = {i: tasks[i] for i in indexes}
        order = []  # (subtask, the piece's place among its subtask's, task, piece)
        for i in indexes:
            places: dict[int, int] = {}
            for j, (subtask, _) in enumerate(tasks[i].pieces):
                places[subtask] = places.get(subtask, -1) + 1
                order.append((subtask, places[subtask], i, j))
        order.sort()
        written: dict[int, list[int]] = {i: [] for i in indexes}
        # Parquet states with nanosecond timestamps: whether every one is a whole microsecond
        micro = {i: True for i in indexes if tasks[i].fmt == "parquet"
                 and not in_microseconds(tasks[i].schema).equals(tasks[i].schema)}
        cleanup: list[Generator[Any, None, None]] = []
        try:
            for i in indexes:
                writers[i] = chosen[i].open_writer()
            units: list[list[tuple[tuple[int, int], Callable[[], pa.Table]]]] = []
            for _, group in groupby(order, key=lambda o: o[:2]):
                units.append([((i, j), tasks[i].pieces[j][1]) for _, _, i, j in group])
            # workers where the pieces are decoded as read (not where they are in memory)
            op = tasks[indexes[0]].op
            decoding = checkpoint is not None and any(
                checkpoint.key_group_estimates(op.uid, h) is not None
                for st in op.subtasks for h in st.keyed[:1])
            count = worker_count(checkpoint, len(units), workers) if (
                checkpoint is not None and decoding) else 0
            read = read_units(checkpoint, units, count)
            cleanup.append(read)
            for (i, j), table in (found for unit in read for found in unit):
                subtask = tasks[i].pieces[j][0]
                task = chosen[i]
                if UNDECODABLE_COLUMN in table.column_names and not task.undecodable:
                    writers.pop(i).close()
                    task = chosen[i] = replace(task, undecodable=True)
                    writers[i] = task.open_writer()
                    for k in written[i]:
                        writers[i].write(task.flat(task.pieces[k][0], task.pieces[k][1]()))
                flat = task.flat(subtask, table)
                if micro.get(i):
                    micro[i] = whole_microseconds(flat)
                writers[i].write(flat)
                written[i].append(j)
                done()
            for i in indexes:
                if not tasks[i].pieces:
                    writers[i].write(chosen[i].schema.empty_table())
        finally:
            for reading in cleanup:  # the workers stop however the writing ends
                reading.close()
            for writer in writers.values():
                writer.close()
        for i in indexes:
            if micro.get(i):
                replace(chosen[i], microseconds=True).recast()
            out[i] = (tasks[i].path, writers[i].rows)
    return [out[i] for i in range(len(tasks))]


@runtime_checkable
class StatesWriter(Protocol):
    """A :data:`StateWriter` that writes every state at once (``write_states``).

    For an engine that reads a stored piece once for all the states it holds (Spark on a Flink
    snapshot, where one stream holds all of an operator's keyed states). It gets every state's
    task with ``microseconds`` false and decides it itself (Parquet: nanosecond timestamps as
    microseconds when every value of the state is a whole microsecond); it returns ``(path,
    rows)`` per task and calls ``done`` once per stored piece.
    """

    def __call__(self, task: StateExport, done: Callable[[], None]) -> tuple[str, int]: ...

    def write_states(self, tasks: Sequence[StateExport], done: Callable[[], None]
                     ) -> list[tuple[str, int]]: ...


def export_checkpoint(checkpoint: Checkpoint, out: str, fmt: str = "parquet",
                      states: Collection[str] | None = None,
                      progress: Progress | None = None,
                      state_writer: StateWriter | None = None) -> ExportResult:
    """Write every state (or those named in ``states``) of ``checkpoint`` under ``out``.

    ``state_writer`` writes one state (default :func:`write_state_locally`; the Spark engine
    writes a directory of parts instead), or every state at once if it is a
    :class:`StatesWriter`.
    """
    if fmt not in FORMATS:
        raise InvalidArgumentError(f"unknown export format {fmt!r} (one of "
                                   f"{', '.join(FORMATS)})")
    check_states(checkpoint, states)
    started = time.perf_counter()
    fs, final = resolve_filesystem(out, None)
    with storage_errors("exporting to", out):
        exists = fs.get_file_info(final).type != pafs.FileType.NotFound
    if exists:
        raise CheckpointError(f"{out} already exists; export writes a new directory: "
                              "choose another --out")
    work = [(op, state, tuple(state_pieces(checkpoint, op, state)))
            for op in checkpoint.metadata.operators for state in op.states
            if states is None or state.name in states]
    total, done = sum(len(pieces) for _, _, pieces in work), 0
    # states with values kept as undecodable markers (decoded at open: known already)
    undecodable = {(p.operator, p.state) for p in checkpoint.undecodable_parts() if p.kept}

    def step() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    taken: set[str] = set()
    write = state_writer or write_state_locally
    batch = isinstance(write, StatesWriter)
    with staged(fs, final, out, "exporting to") as staging:
        tasks = []
        for op, state, pieces in work:
            name = _file_name(taken, op.uid, state.name, FORMATS[fmt])
            micro = (not batch and state_writer is not None and fmt == "parquet"
                     and _microseconds_suffice(table_schema(op, state), pieces))
            tasks.append(StateExport(op, state, fmt, fs, staging, name, pieces, micro,
                                     (op.uid, state.name) in undecodable,
                                     is_time_window(checkpoint, op, state)))
        written = (write.write_states(tasks, step) if isinstance(write, StatesWriter)
                   else write_states_locally(tasks, step, checkpoint) if state_writer is None
                   else [write(task, step) for task in tasks])
        exported = [ExportedTable(task.op.identity, task.state.name, task.state.scope,
                                  task.state.kind, path, rows)
                    for task, (path, rows) in zip(tasks, written, strict=True)]
        manifest = {"schema_version": SCHEMA_VERSION,
                    "checkpoint_id": checkpoint.metadata.checkpoint_id, "format": fmt,
                    "tables": [t.to_json() for t in exported]}
        commit(fs, staging, final, MANIFEST,
               json.dumps(manifest, indent=2, ensure_ascii=False).encode())
    return ExportResult(out, fmt, tuple(exported), time.perf_counter() - started)
