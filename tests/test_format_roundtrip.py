"""Format v1 round trip, property-based (issue 4, acceptance "Round trip").

Hypothesis builds an operator: a key type, max parallelism and parallelism, keyed states of
every kind with random declared types (scalars, ``list``, ``map``, ``tuple``, nested; and the
types of Flink jobs: ``struct`` (POJOs), ``enum``, ``timestamp[ms|us|ns]``, ``date32``,
``local_time``, ``local_datetime``, ``bigint``, ``decimal``, ``kryo<class>``), random
namespace types and TTL on some, and operator states (split, union, broadcast) with random
elements. The subtasks' backends are filled through the state API, checkpointed with
``write_checkpoint`` and restored into fresh backends. Checked:

* the raw stored contents (``{(key, namespace): state}`` per table, ``TtlValue`` included) and
  the operator snapshots are equal after the round trip, with a comparison that tells ``bool``
  from ``int``, ``-0.0`` from ``0.0`` and ``bytes`` from ``str``;
* plain ``pyarrow.parquet`` reads every keyed file with the declared Arrow types, rows grouped
  by key group in ascending order and where the metadata says; ``pyarrow.dataset`` over one
  state's folder reads every row;
* ``keyed_entries`` of one key group returns exactly that key group's entries and reads only
  the row groups holding its rows (``ROW_GROUP_ROWS`` made small so files have many).
"""

from __future__ import annotations

import datetime
import decimal
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings

import formats.statectl.writer as statectl_writer
from formats.model.arrow_types import arrow_type
from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import (
    KeyedStateHandle,
    OperatorMetadata,
    OperatorSnapshot,
    SubtaskSnapshot,
)
from statecore.errors import KeyGroupError, StatectlError
from statecore.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import (
    AggregatingState,
    KeyedState,
    ListState,
    MapState,
    ReducingState,
    StateDescriptor,
    ValueState,
    aggregating_state,
    list_state,
    map_state,
    reducing_state,
    value_state,
)
from statecore.operator_backend import (
    BroadcastStateDescriptor,
    OperatorListStateDescriptor,
    OperatorStateBackend,
    OperatorStateSnapshot,
)
from statecore.serializers import VOID_NAMESPACE, VoidNamespace, parse_type
from statecore.ttl import ManualClock, StateVisibility, TtlConfig, TtlValue, UpdateType
from statecore.values import NANOS_PER_DAY, Instant, LocalDateTime, LocalTime

MAX_KEYS = 30

# -- comparison that sees what == hides ----------------------------------------------------


def canon(value: Any) -> Any:
    """A hashable form of a stored value that tells apart what Python's ``==`` merges.

    ``True == 1``, ``-0.0 == 0.0``, ``[1] != (1,)`` only by type: every scalar is tagged with
    its type, floats are compared by their bits, containers by kind.
    """
    if isinstance(value, TtlValue):
        return ("ttl", canon(value.user_value), canon(value.last_access_timestamp))
    if isinstance(value, VoidNamespace):
        return ("void",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, tuple):
        return ("tuple", tuple(canon(v) for v in value))
    if isinstance(value, list):
        return ("list", tuple(canon(v) for v in value))
    if isinstance(value, dict):
        return ("dict", frozenset((canon(k), canon(v)) for k, v in value.items()))
    if isinstance(value, decimal.Decimal):  # the scale too: 1.50 is not 1.5
        return ("decimal", value.as_tuple())
    if isinstance(value, Instant | LocalTime | LocalDateTime | datetime.date):
        return (type(value).__name__, value)
    if value is None:  # a null field of a struct
        return ("null",)
    raise AssertionError(f"unexpected stored value {value!r} of type {type(value).__name__}")


# -- declared types and their values ------------------------------------------------------


@dataclass(frozen=True)
class Typed:
    """A type spec and a strategy for values of it."""

    spec: str
    values: st.SearchStrategy[Any]


def _int(bits: int) -> Typed:
    return Typed(f"int{bits}", st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1))


_SURROGATES: list[Any] = ["Cs"]  # lone surrogates are not text (not valid UTF-8)
_NO_SURROGATES = st.characters(exclude_categories=_SURROGATES)
SCALARS: list[Typed] = [
    _int(8), _int(16), _int(32), _int(64),
    # width=32 floats are exactly representable in float32 (-0.0 included)
    Typed("float32", st.floats(width=32, allow_nan=False, allow_infinity=False)),
    Typed("float64", st.floats(allow_nan=False, allow_infinity=False)),
    Typed("bool", st.booleans()),
    Typed("char", st.characters(max_codepoint=0xFFFF, exclude_categories=_SURROGATES)),
    Typed("string", st.text(_NO_SURROGATES, max_size=8)),
    Typed("bytes", st.binary(max_size=8)),
]
_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
#: The types of Flink jobs (issue 20), as statectl declares them.
TYPED_SCALARS: list[Typed] = [
    Typed("timestamp[ms]", _INT64.map(lambda v: Instant(v * 1_000_000))),
    Typed("timestamp[us]", _INT64.map(lambda v: Instant(v * 1_000))),
    Typed("timestamp[ns]", _INT64.map(Instant)),
    Typed("date32", st.dates()),
    Typed("local_time", st.integers(0, NANOS_PER_DAY - 1).map(LocalTime)),
    Typed("local_datetime", _INT64.map(LocalDateTime)),
    Typed("bigint", st.integers(-(10 ** 40), 10 ** 40)),
    Typed("decimal", st.decimals(allow_nan=False, allow_infinity=False)),
    Typed("enum<ACTIVE,SUSPENDED,CLOSED>", st.sampled_from(["ACTIVE", "SUSPENDED", "CLOSED"])),
    Typed("kryo<java.util.UUID>", st.binary(max_size=18)),
]
SCALARS += TYPED_SCALARS
#: Types whose values can be dict keys (map keys, broadcast keys): every scalar.
HASHABLE_SCALARS = SCALARS


@st.composite
def struct_types(draw: st.DrawFn, depth: int) -> Typed:
    """A POJO: named fields (case kept), each of a value type, each possibly null."""
    names = draw(st.lists(st.sampled_from(["a", "bB", "c_1", "$d", "Zip"]), min_size=1,
                          max_size=3, unique=True))
    fields = [(name, draw(value_types(depth))) for name in names]
    spec = "struct<" + ",".join(f"{n}:{t.spec}" for n, t in fields) + ">"
    return Typed(spec, st.fixed_dictionaries({n: st.none() | t.values for n, t in fields}))


@st.composite
def hashable_types(draw: st.DrawFn) -> Typed:
    if draw(st.integers(0, 4)) == 0:
        a, b = draw(st.sampled_from(HASHABLE_SCALARS)), draw(st.sampled_from(HASHABLE_SCALARS))
        return Typed(f"tuple<{a.spec},{b.spec}>", st.tuples(a.values, b.values))
    return draw(st.sampled_from(HASHABLE_SCALARS))


@st.composite
def value_types(draw: st.DrawFn, depth: int = 2) -> Typed:
    """Scalars, ``list<T>``, ``map<K,V>``, ``tuple<A,B>``, ``struct`` nested up to ``depth``."""
    shape = draw(st.sampled_from(["scalar"] * 3 + (["list", "map", "tuple", "struct"]
                                                   if depth else [])))
    if shape == "scalar":
        return draw(st.sampled_from(SCALARS))
    if shape == "struct":
        return draw(struct_types(depth - 1))
    if shape == "list":
        element = draw(value_types(depth - 1))
        return Typed(f"list<{element.spec}>", st.lists(element.values, max_size=3))
    if shape == "map":
        key, item = draw(hashable_types()), draw(value_types(depth - 1))
        return Typed(f"map<{key.spec},{item.spec}>",
                     st.dictionaries(key.values, item.values, max_size=3))
    a, b = draw(value_types(depth - 1)), draw(value_types(depth - 1))
    return Typed(f"tuple<{a.spec},{b.spec}>", st.tuples(a.values, b.values))


KEY_TYPES: list[Typed] = [
    Typed("string", st.text(_NO_SURROGATES, max_size=6)),
    _int(32),
    _int(64),
    Typed("tuple<string,int64>", st.tuples(st.text(_NO_SURROGATES, max_size=4),
                                           st.integers(-(1 << 63), (1 << 63) - 1))),
    # keys of Flink's value types whose Java hashCode the JDK defines
    *(t for t in TYPED_SCALARS if parse_type(t.spec).hashable and t.spec != "timestamp[us]"),
]
NAMESPACE_TYPES: list[Typed] = [
    Typed("void", st.just(VOID_NAMESPACE)),
    _int(64),
    Typed("tuple<int64,int64>", st.tuples(st.integers(-(1 << 63), (1 << 63) - 1),
                                          st.integers(-5, 5))),
    Typed("global_window", st.just("GlobalWindow")),
]


class LastValue:
    """An aggregate function whose accumulator is the last value added (any declared type)."""

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        return value

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return b


def _last(_old: Any, new: Any) -> Any:
    return new


@dataclass(frozen=True)
class KeyedSpec:
    """A keyed state to register, and how to draw what one key writes into it."""

    descriptor: StateDescriptor
    value: Typed
    user_key: Typed | None
    namespace: Typed


@st.composite
def keyed_specs(draw: st.DrawFn, index: int) -> KeyedSpec:
    kind = draw(st.sampled_from(["value", "list", "map", "reducing", "aggregating"]))
    value = draw(value_types())
    namespace = draw(st.sampled_from(NAMESPACE_TYPES))
    ttl = None
    if draw(st.booleans()):
        ttl = TtlConfig(
            draw(st.integers(10**12, 1 << 62)),  # nothing expires while the test runs
            update_type=draw(st.sampled_from(UpdateType)),
            visibility=draw(st.sampled_from(StateVisibility)),
            cleanup_full_snapshot=draw(st.booleans()))
    name = f"k{index}-" + draw(st.text(_NO_SURROGATES, max_size=5))
    options: dict[str, Any] = {"namespace_type": namespace.spec, "ttl": ttl}
    user_key = None
    if kind == "value":
        descriptor = value_state(name, value.spec, **options)
    elif kind == "list":
        descriptor = list_state(name, value.spec, **options)
    elif kind == "map":
        user_key = draw(hashable_types())
        descriptor = map_state(name, user_key.spec, value.spec, **options)
    elif kind == "reducing":
        descriptor = reducing_state(name, _last, value.spec, **options)
    else:
        descriptor = aggregating_state(name, LastValue(), value.spec, **options)
    return KeyedSpec(descriptor, value, user_key, namespace)


@dataclass(frozen=True)
class OperatorSpec:
    name: str
    mode: str  # split | union | broadcast
    value: Typed
    key: Typed | None


@st.composite
def operator_specs(draw: st.DrawFn, index: int) -> OperatorSpec:
    mode = draw(st.sampled_from(["split", "union", "broadcast"]))
    name = f"o{index}-" + draw(st.text(_NO_SURROGATES, max_size=5))
    key = draw(hashable_types()) if mode == "broadcast" else None
    return OperatorSpec(name, mode, draw(value_types()), key)


def fresh_backend(key_type: str, max_parallelism: int, kg_range: KeyGroupRange,
                  specs: list[KeyedSpec], clock: ManualClock) -> HeapKeyedStateBackend[Any]:
    backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(
        key_type, max_parallelism, kg_range, clock=clock)
    for spec in specs:
        backend.get_state(spec.descriptor)
    return backend


def write_one(draw: st.DrawFn, spec: KeyedSpec, state: KeyedState, clock: ManualClock) -> None:
    """Write random values for the current key into ``state`` through its API."""
    for namespace in draw(st.lists(spec.namespace.values, min_size=1, max_size=2)):
        clock.advance(draw(st.integers(0, 1000)))
        state.set_current_namespace(namespace)
        if isinstance(state, ValueState):
            state.update(draw(spec.value.values))
        elif isinstance(state, ListState):
            state.add_all(draw(st.lists(spec.value.values, min_size=1, max_size=3)))
        elif isinstance(state, MapState):
            assert spec.user_key is not None
            for _ in range(draw(st.integers(1, 2))):  # several puts: several TTL timestamps
                clock.advance(draw(st.integers(0, 10)))
                state.put_all(draw(st.dictionaries(spec.user_key.values, spec.value.values,
                                                   min_size=1, max_size=3)))
        elif isinstance(state, ReducingState | AggregatingState):
            state.add(draw(spec.value.values))
        else:
            raise AssertionError(state)


@dataclass
class Scenario:
    uid: str
    key_type: str
    max_parallelism: int
    parallelism: int
    keyed: list[KeyedSpec]
    clock: ManualClock
    backends: list[HeapKeyedStateBackend[Any]]
    operator_backends: list[OperatorStateBackend | None]
    row_group_rows: int


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    key_type = draw(st.sampled_from(KEY_TYPES))
    max_parallelism = draw(st.integers(4, 128))
    parallelism = draw(st.integers(1, 3))
    keyed = [draw(keyed_specs(i)) for i in range(draw(st.integers(1, 4)))]
    operator = [draw(operator_specs(i)) for i in range(draw(st.integers(0, 3)))]
    clock = ManualClock(draw(st.integers(0, 1 << 61)))
    backends = [fresh_backend(key_type.spec, max_parallelism,
                              compute_key_group_range_for_operator_index(
                                  max_parallelism, parallelism, i), keyed, clock)
                for i in range(parallelism)]
    size = draw(st.integers(1, MAX_KEYS)) if draw(st.integers(0, 9)) else 0
    for key in draw(st.lists(key_type.values, min_size=size, max_size=size, unique=True)):
        backend = next(b for b in backends if _owns(b, key))
        for spec in keyed:
            if draw(st.integers(0, 3)):
                backend.set_current_key(key)
                write_one(draw, spec, backend.get_state(spec.descriptor), clock)
    operator_backends: list[OperatorStateBackend | None] = []
    for _ in range(parallelism):
        if operator and draw(st.integers(0, 5)) == 0:
            operator_backends.append(None)  # a subtask without operator state
            continue
        ops = OperatorStateBackend()
        for op_spec in operator:
            if op_spec.mode == "broadcast":
                assert op_spec.key is not None
                ops.get_broadcast_state(BroadcastStateDescriptor(
                    op_spec.name, op_spec.key.spec, op_spec.value.spec)).put_all(
                    draw(st.dictionaries(op_spec.key.values, op_spec.value.values, max_size=4)))
            else:
                descriptor = OperatorListStateDescriptor(op_spec.name, op_spec.value.spec)
                register = (ops.get_list_state if op_spec.mode == "split"
                            else ops.get_union_list_state)
                register(descriptor).add_all(draw(st.lists(op_spec.value.values, max_size=5)))
        operator_backends.append(ops)
    uid = draw(st.text(_NO_SURROGATES, min_size=1, max_size=8))
    return Scenario(uid, key_type.spec, max_parallelism, parallelism, keyed, clock, backends,
                    operator_backends, draw(st.sampled_from([1, 2, 3, 5, 65_536])))


def _owns(backend: HeapKeyedStateBackend[Any], key: Any) -> bool:
    try:
        backend.set_current_key(key)
    except KeyGroupError:
        return False
    return True


# -- what is stored ---------------------------------------------------------------------------


def contents(backend: HeapKeyedStateBackend[Any]) -> dict[str, dict[Any, Any]]:
    """``{state: {(key, namespace): stored state}}``, canonical."""
    return {d.name: {(canon(e.key), canon(e.namespace)): canon(e.state)
                     for e in backend.table(d.name)}
            for d in backend.descriptors}


def key_group_contents(backend: HeapKeyedStateBackend[Any], state: str,
                       key_group: int) -> dict[Any, Any]:
    return {(canon(e.key), canon(e.namespace)): canon(e.state)
            for e in backend.table(state).map_for_key_group(key_group)}


def operator_contents(snapshot: OperatorStateSnapshot) -> Any:
    return [(e.name, e.mode, e.value_type_spec, e.key_type_spec, canon(e.elements),
             canon(dict(e.entries))) for e in snapshot]


def value_column_spec(descriptor: StateDescriptor) -> tuple[str, str]:
    """The declared specs of the ``value`` and ``ttl_timestamp`` columns (DESIGN, format v1)."""
    if descriptor.kind.value == "list":
        return f"list<{descriptor.value_type}>", "list<int64>"
    if descriptor.kind.value == "map":
        return (f"map<{descriptor.user_key_type},{descriptor.value_type}>",
                f"map<{descriptor.user_key_type},int64>")
    return descriptor.value_type, "int64"


def handles_of(op: OperatorMetadata, state: str) -> Iterator[KeyedStateHandle]:
    for subtask in op.subtasks:
        for handle in subtask.keyed:
            if handle.state == state:
                yield handle


# -- the property ---------------------------------------------------------------------------


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario=scenarios(), data=st.data())
def test_round_trip(scenario: Scenario, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(statectl_writer, "ROW_GROUP_ROWS", scenario.row_group_rows)
        root = Path(tmp) / "chk-1"
        expected_keyed = [contents(b) for b in scenario.backends]
        expected_operator = [None if ops is None else ops.snapshot()
                             for ops in scenario.operator_backends]
        write_checkpoint(str(root), 1, [OperatorSnapshot(
            scenario.uid, "the operator", scenario.parallelism, scenario.max_parallelism,
            [SubtaskSnapshot(i, backend.snapshot(), None if ops is None else ops.snapshot())
             for i, (backend, ops) in enumerate(zip(scenario.backends,
                                                     scenario.operator_backends,
                                                     strict=True))])])
        # writing consumed snapshots only: the backends still hold the same state
        assert [contents(b) for b in scenario.backends] == expected_keyed

        checkpoint = open_checkpoint(str(root))
        entries = sum(len(c) for b in expected_keyed for c in b.values())
        event(f"stored entries: {'0' if not entries else '1-20' if entries <= 20 else '>20'}")
        check_restore(checkpoint, scenario, expected_keyed, expected_operator)
        check_plain_parquet(checkpoint, root, scenario, expected_keyed)
        check_single_key_group(checkpoint, root, scenario, data.draw)
        for info in checkpoint.metadata.files:
            checkpoint.verify_checksum(info.path)


def check_restore(checkpoint: Checkpoint, scenario: Scenario,
                  expected_keyed: list[dict[str, dict[Any, Any]]],
                  expected_operator: list[OperatorStateSnapshot | None]) -> None:
    for i, original in enumerate(scenario.backends):
        restored = fresh_backend(scenario.key_type, scenario.max_parallelism,
                                 original.key_group_range, scenario.keyed, scenario.clock)
        loaded = checkpoint.restore_keyed(scenario.uid, restored)
        assert contents(restored) == expected_keyed[i]
        assert loaded == sum(len(entries) for entries in expected_keyed[i].values())
        operator = checkpoint.restore_operator(scenario.uid, i).snapshot()
        before = expected_operator[i]
        assert operator_contents(operator) == (
            [] if before is None else operator_contents(before))


def check_plain_parquet(checkpoint: Checkpoint, root: Path, scenario: Scenario,
                        expected_keyed: list[dict[str, dict[Any, Any]]]) -> None:
    op = checkpoint.operator(scenario.uid)
    assert op.key_type == scenario.key_type
    for spec in scenario.keyed:
        descriptor = spec.descriptor
        value_spec, ttl_spec = value_column_spec(descriptor)
        expected = {"key_group": pa.int32(), "key": arrow_type(scenario.key_type),
                    "value": arrow_type(value_spec)}
        if descriptor.namespace_type != "void":
            expected["namespace"] = arrow_type(descriptor.namespace_type)
        if descriptor.ttl is not None:
            expected["ttl_timestamp"] = arrow_type(ttl_spec)
        handles = list(handles_of(op, descriptor.name))
        assert len(handles) == scenario.parallelism
        folders = set()
        for handle in handles:
            table = pq.read_table(root / handle.file)
            assert set(table.column_names) == set(expected)
            for name, arrow in expected.items():
                actual = table.schema.field(name).type
                assert actual.equals(arrow), (name, actual, arrow)
            groups = table.column("key_group").to_pylist()
            assert groups == sorted(groups)
            assert all(g in handle.key_group_range for g in groups)
            for rows in handle.rows:
                assert rows.row_count > 0
                assert groups[rows.first_row:rows.first_row + rows.row_count] == (
                    [rows.key_group] * rows.row_count)
            assert sum(r.row_count for r in handle.rows) == len(groups)
            folders.add((root / handle.file).parent)
        assert len(folders) == 1  # one folder per state: a dataset
        dataset = ds.dataset(str(folders.pop()), format="parquet").to_table()
        assert dataset.num_rows == sum(len(c[descriptor.name]) for c in expected_keyed)
        for name, arrow in expected.items():
            assert dataset.schema.field(name).type.equals(arrow)


def check_single_key_group(checkpoint: Checkpoint, root: Path, scenario: Scenario,
                           draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
    op = checkpoint.operator(scenario.uid)
    name = draw(st.sampled_from(scenario.keyed)).descriptor.name
    with_rows = sorted(r.key_group for h in handles_of(op, name) for r in h.rows)
    candidates = st.integers(0, scenario.max_parallelism - 1)
    if with_rows and draw(st.integers(0, 4)):  # mostly a key group that has rows
        candidates = st.sampled_from(with_rows)
    key_group = draw(candidates)
    read, total = check_key_group_read(checkpoint, root, scenario.uid, name, key_group,
                                       scenario.backends)
    event(f"single key group read: {read} of {total} row groups")


def check_key_group_read(checkpoint: Checkpoint, root: Path, uid: str, name: str,
                         key_group: int, backends: list[HeapKeyedStateBackend[Any]]
                         ) -> tuple[int, int]:
    """``keyed_entries`` of one key group: exactly its entries, only its row groups read.

    Returns (row groups read, row groups in the file).
    """
    owner = next(b for b in backends if key_group in b.key_group_range)
    expected = key_group_contents(owner, name, key_group)
    handle = next(h for h in handles_of(checkpoint.operator(uid), name)
                  if key_group in h.key_group_range)
    rows = [r for r in handle.rows if r.key_group == key_group]
    parquet = pq.ParquetFile(root / handle.file)
    overlapping, start = [], 0
    for i in range(parquet.num_row_groups):
        n = parquet.metadata.row_group(i).num_rows
        groups = parquet.read_row_group(i, columns=["key_group"]).column(0).to_pylist()
        if key_group in groups:
            overlapping.append(i)
            # never split across a row group it shares: alone, or whole in this one
            assert set(groups) == {key_group} or groups.count(key_group) == sum(
                r.row_count for r in rows)
        if rows and start < rows[0].first_row + rows[0].row_count and (
                rows[0].first_row < start + n):
            assert key_group in groups  # the metadata points at the right row group
        start += n
    assert bool(rows) == bool(overlapping)

    calls: list[list[int]] = []
    original = pq.ParquetFile.read_row_groups

    def spy(self: pq.ParquetFile, row_groups: Any, *args: Any, **kwargs: Any) -> pa.Table:
        calls.append(list(row_groups))
        return original(self, row_groups, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pq.ParquetFile, "read_row_groups", spy)
        entries = list(checkpoint.keyed_entries(uid, name, KeyGroupRange(key_group, key_group)))
    assert all(entry[0] == key_group for entry in entries)
    assert {(canon(k), canon(ns)): canon(s) for _, k, ns, s in entries} == expected
    assert len(entries) == len(expected)
    assert [g for call in calls for g in call] == overlapping
    return len(overlapping), parquet.num_row_groups


def test_one_key_group_is_read_from_its_row_groups_only(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic companion of the property: many row groups, every key group read alone."""
    monkeypatch.setattr(statectl_writer, "ROW_GROUP_ROWS", 3)
    clock = ManualClock(5)
    specs = [KeyedSpec(value_state("v", "int64"), _int(64), None, NAMESPACE_TYPES[0]),
             KeyedSpec(list_state("l", "string", namespace_type="int64", ttl=TtlConfig(10**9)),
                       SCALARS[8], None, NAMESPACE_TYPES[1])]
    backends = [fresh_backend("string", 32, compute_key_group_range_for_operator_index(32, 2, i),
                              specs, clock) for i in range(2)]
    for k in range(200):
        backend = next(b for b in backends if _owns(b, f"key {k}"))
        value, lst = (backend.get_state(spec.descriptor) for spec in specs)
        assert isinstance(value, ValueState) and isinstance(lst, ListState)
        value.update(k)
        for window in range(k % 3):
            lst.set_current_namespace(window)
            lst.add_all([f"{k}/{window}"] * (1 + k % 2))
    write_checkpoint(str(tmp_path / "chk"), 3, [OperatorSnapshot(
        "uid", "op", 2, 32, [SubtaskSnapshot(i, b.snapshot()) for i, b in enumerate(backends)])])
    checkpoint = open_checkpoint(str(tmp_path / "chk"))
    for name in ("v", "l"):
        reads = [check_key_group_read(checkpoint, tmp_path / "chk", "uid", name, kg, backends)
                 for kg in range(32)]
        # each key group is read from its row groups (checked above) in a file that has many;
        # ROW_GROUP_ROWS = 3 gives the larger ones several of their own
        assert all(total > 3 for _, total in reads), reads
        assert any(read > 1 for read, _ in reads), reads
        assert sum(read for read, _ in reads) >= 30


@pytest.mark.parametrize(("value_type", "value"), [
    ("int64", True), ("int64", 1.5), ("int32", 2**40), ("int8", 200), ("bool", 1),
    ("bytes", "text"), ("string", b"bytes"), ("char", "ab"), ("char", "\U0001f600"),
    ("float64", "1.0"), ("list<int64>", (1, 2)), ("list<int64>", [1, 2.5]),
    ("tuple<int64,int64>", [1, 2]), ("map<string,int64>", [("a", 1)]),
])
def test_a_value_not_of_its_declared_type_is_refused(tmp_path: Path, value_type: str,
                                                     value: Any) -> None:
    """The state API does not check value types; the writer must, or the restored state would
    differ from the written one (``1.5`` back as ``1``, ``"text"`` as ``b"text"``)."""
    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 8)
    state = backend.get_value_state(value_state("v", value_type))
    backend.set_current_key("k")
    state.update(value)
    with pytest.raises(StatectlError):
        write_checkpoint(str(tmp_path / "chk"), 1, [OperatorSnapshot(
            "u", "n", 1, 8, [SubtaskSnapshot(0, backend.snapshot())])])
    assert not any(tmp_path.iterdir())
